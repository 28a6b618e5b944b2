"""SPEC §8.6: A2A 0.3 JSON-RPC through the last 0.3 releases of the official clients, unchanged:
`a2a-sdk` 0.3.26 (Python, in its own virtualenv, since this one holds 1.3.0) and `@a2a-js/sdk`
0.3.14 (tests/a2a/js_v0_3). Each reads the card, posts, contributes, gets a refusal Message and
reads an evaluation through tasks/get.

Both are installed by tests/a2a/clients.py (on first use, or ahead by `make clients`) and kept;
a test is skipped only when its client cannot be had (no network, no node)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.a2a import clients
from tests.a2a.conftest import as_json, npm_installed, run_node
from tests.factories import contribution_payload, open_task_payload, open_task_request

HERE = Path(__file__).parent
JS_V0_3_DIR = clients.JS_DIRS[1]
REFUSED = open_task_payload(open_task_request(sources=["https://example.com/not-allowed"]))


@pytest.fixture(scope="module")
def python_0_3() -> Path:
    try:
        return clients.python_0_3()
    except clients.Unavailable as unavailable:
        pytest.skip(str(unavailable))


@pytest.fixture(scope="module")
def node_0_3() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    npm_installed(JS_V0_3_DIR)
    return node


def _flow(live_url: str, poster: Any, contributor: Any, evaluated_id: str) -> dict[str, Any]:
    return {
        "base": live_url,
        "posterToken": poster.token,
        "contributorToken": contributor.token,
        "post": open_task_payload(),
        "contribution": contribution_payload(),
        "refused": REFUSED,
        "evaluatedId": evaluated_id,
    }


def _assert_0_3_answers(seen: dict[str, Any], live_url: str) -> None:
    """What both 0.3 clients must have seen, in 0.3's JSON."""
    card = seen["card"]
    assert (card["url"], card["preferredTransport"], card["protocolVersion"]) == (
        f"{live_url}/api/a2a",
        "JSONRPC",
        "0.3",
    )
    posted = seen["posted"]
    assert posted["kind"] == "task" and posted["status"]["state"] == "working"
    refusal = seen["refusal"]
    assert (refusal["kind"], refusal["role"]) == ("message", "agent")
    assert refusal["metadata"] == {"cairn": {"accepted": False}}
    assert refusal["parts"][0]["data"]["error"]["code"] == "source_not_allowed"
    contributed = seen["contributed"]
    assert contributed["id"] == posted["id"]
    assert as_json(contributed["metadata"]["cairn"])["contributions_received"] == 1
    evaluated = seen["evaluated"]
    assert evaluated["status"]["state"] == "completed"
    (artifact,) = evaluated["artifacts"]
    assert artifact["artifactId"] == "evaluation"
    assert as_json(artifact["parts"][0]["data"])["outcome"] == "resolved"


def test_a2a_sdk_0_3_reads_the_card_posts_contributes_and_reads(
    python_0_3, live_url, poster, make_agent, evaluated_id
):
    flow = _flow(live_url, poster, make_agent(), evaluated_id)

    ran = subprocess.run(
        [str(python_0_3), str(HERE / "v0_3" / "sdk_flow.py")],
        input=json.dumps(flow).encode(),
        capture_output=True,
        check=False,
        timeout=120,
    )

    assert ran.returncode == 0, ran.stderr.decode()
    _assert_0_3_answers(json.loads(ran.stdout), live_url)


def test_a2a_js_sdk_0_3_reads_the_card_posts_contributes_and_reads(
    node_0_3, live_url, poster, make_agent, evaluated_id
):
    seen = run_node(
        node_0_3, JS_V0_3_DIR, "cairn_flow.mjs", _flow(live_url, poster, make_agent(), evaluated_id)
    )

    _assert_0_3_answers(seen, live_url)
    assert set(seen["requests"]) <= {"GET /.well-known/agent-card.json", "POST /api/a2a"}
