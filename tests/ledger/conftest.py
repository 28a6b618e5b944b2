"""Fixtures for verifiability: a client that checks what Cairn signs with nothing but its JWKS."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from typing import Any

import httpx
import pytest
import rfc8785
from joserfc import jws
from joserfc.errors import SecurityWarning
from joserfc.jwk import KeySet

from ledger.services import log_sequence
from ledger.verifier import VERIFIER
from tasks.evaluation import task_evaluate
from tasks.models import Task
from tests.factories import contribution_payload, contribution_report
from tests.ledger.keyper_processes import keyper_site  # noqa: F401  (a fixture)
from tests.ledger.witness_processes import witness_processes, witnessed  # noqa: F401  (fixtures)
from tests.scripts import loaded_script


def signed_payload(token: str, jwks: dict[str, Any]) -> dict[str, Any]:
    """The payload of a compact JWS, after checking its EdDSA signature with the published keys."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SecurityWarning)
        verified = jws.deserialize_compact(token, KeySet.import_key_set(jwks), algorithms=["EdDSA"])
    return json.loads(verified.payload)


def receipt_verified(receipt: dict[str, Any], http: httpx.Client) -> None:
    """Assert the receipt's signature covers exactly the JCS of the rest of the receipt."""
    claims = {key: value for key, value in receipt.items() if key != "signature"}
    token = receipt["signature"]
    payload = token.split(".")[1]
    assert payload, "the payload must be embedded, not detached"
    assert signed_payload(token, http.get("/.well-known/jwks.json").json()) == claims
    assert jws.extract_compact(token.encode()).payload == rfc8785.dumps(claims)


def load_verifier():
    """The offline verifier as a module, from the one file that is served."""
    return next(loaded_script(VERIFIER, "cairn_verify"))


@pytest.fixture
def verify(http, live_url, tmp_path):
    """Run the verifier exactly as served, with its default URL and its own CAIRN_HOME."""
    served = http.get("/verify/cairn_verify.py")
    assert served.status_code == 200
    assert f'DEFAULT_CAIRN_URL = "{live_url}"' in served.text
    script = tmp_path / "cairn_verify.py"
    script.write_text(served.text)
    home = tmp_path / "home"

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, str(script), *args],
            env={"CAIRN_HOME": str(home), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=60,
        )

    return run


@pytest.fixture
def evaluated(poster, post_task, make_agent, contribute, time_machine, tmp_path):
    """A task with two sealed contributions, evaluated and logged; its receipts saved as files."""
    task = post_task(poster)
    receipts = []
    for verdict in ("source_supported", "source_supported"):
        payload = contribution_payload(contribution_report(verdict=verdict))
        receipts.append(contribute(make_agent(), task, payload)["receipt"])
    time_machine.move_to(task.deadline, tick=True)
    task_evaluate(task_id=task.pk)
    log_sequence()
    files = []
    for receipt in receipts:
        path = tmp_path / f"{receipt['contribution_id']}.json"
        path.write_text(json.dumps(receipt))
        files.append(path)
    return Task.objects.get(pk=task.pk), files
