"""What the tests of SPEC §16.2 share: docs/deployment.md's PostgreSQL blocks run as printed, a
second Cairn witnessing the site's log, and a load of task posts and contributions that keeps every
task and receipt answered 201, with the check that the log holds each of them."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import rfc8785
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.merkle import consistency_verify
from ledger.signed_note import (
    COSIGNATURE_V1,
    ED25519,
    VerifierKey,
    checkpoint_body_parse,
    note_parse,
    private_verifier_key,
)
from tests.deploy.postgres import BIN_DIR, PrivatePostgres
from tests.deploy.processes import Deployment, cairn_env
from tests.factories import contribution_payload, open_task_payload

DATABASE = "cairn_failover"
# Without CAIRN_SITE_URL the site's log is `localhost/cairn/log`.
LOG_ORIGIN = "localhost/cairn/log"


def postgres_folder() -> Path:
    """A folder of the server's user (in /tmp itself: pytest's folders are closed to others)."""
    folder = Path(tempfile.mkdtemp(prefix="cairn-postgres-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    return folder


def started(stack: ExitStack, server: PrivatePostgres) -> PrivatePostgres:
    """`server` started, and on `stack`'s close stopped and removed."""
    stack.callback(server.remove)
    server.start()
    stack.callback(server.stop)
    server.wait_ready()
    return server


def run_block(block: str, server: PrivatePostgres, **variables: str) -> None:
    """A shell block of the docs, as printed, as the `postgres` user the docs run it as, with libpq
    pointed at `server` and the block's own variables set."""
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    env = {
        **os.environ,
        "PATH": f"{BIN_DIR}:{os.environ['PATH']}",
        "PGHOST": "127.0.0.1",
        "PGPORT": str(server.port),
        "PGUSER": "postgres",
        **variables,
    }
    done = subprocess.run(
        [*as_user, "bash", "-eo", "pipefail", "-c", block],
        cwd="/tmp",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"{block}\n{done.stdout}\n{done.stderr}"


def _pem(key: Ed25519PrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def site_log_key() -> VerifierKey:
    """The verifier key of the log of a site run with `cairn_env`'s signing key."""
    text = os.environ["CAIRN_SIGNING_KEY"]
    if not text.startswith("-----BEGIN"):
        text = Path(text).read_text()
    key = serialization.load_pem_private_key(text.encode(), password=None)
    assert isinstance(key, Ed25519PrivateKey)
    return private_verifier_key(LOG_ORIGIN, key, type=ED25519)


@dataclass
class Witness:
    """A second Cairn, on a database of its own, witnessing the site's log (SPEC §15.4)."""

    deployment: Deployment
    key: VerifierKey

    @property
    def configured(self) -> str:
        """The site's `CAIRN_WITNESSES` naming it."""
        return f"{self.key.text} {self.deployment.web_urls[0]}/api/witness"

    def follow(self, log_key: str) -> None:
        """As its operator does for a site's new log: the log's verifier key added beside the
        ones it follows (`CAIRN_WITNESSED_LOGS`, one a line), and the witness restarted at the
        address the site knows it by."""
        url = self.deployment.web_urls.pop()
        self.deployment.stop_all()
        settings = self.deployment.env
        settings["CAIRN_WITNESSED_LOGS"] = f"{settings['CAIRN_WITNESSED_LOGS']}\n{log_key}"
        self.deployment.start_web(port=int(url.rsplit(":", 1)[1]))


def witness_cairn(folder: Path, server: PrivatePostgres) -> Witness:
    """A witness Cairn's web process, on SQLite in `folder`; `server` only fills the field."""
    signing = Ed25519PrivateKey.generate()
    name = "witness.test/cairn"
    env = cairn_env(
        f"sqlite:///{folder / 'witness.sqlite3'}",
        CAIRN_SIGNING_KEY=_pem(Ed25519PrivateKey.generate()),
        CAIRN_WITNESS_SIGNING_KEY=_pem(signing),
        CAIRN_WITNESS_NAME=name,
        CAIRN_WITNESSED_LOGS=site_log_key().text,
    )
    deployment = Deployment(
        broker="orm", postgres=server, database_url=env["DATABASE_URL"], env=env, logs=folder
    )
    deployment.manage("migrate", "--noinput")
    deployment.start_web()
    return Witness(deployment, private_verifier_key(name, signing, type=COSIGNATURE_V1))


def site_cairn(
    database_url: str, server: PrivatePostgres, witness: Witness, folder: Path
) -> Deployment:
    """The site: one web process and one worker (which runs the sequencer every second and asks
    the witness to cosign), its log state file in `folder` where a restore does not reach."""
    env = cairn_env(
        database_url,
        CAIRN_WITNESSES=witness.configured,
        CAIRN_LOG_INTERVAL_S="1",
        CAIRN_LOG_STATE=str(folder / "log_state.json"),
    )
    deployment = Deployment(
        broker="orm", postgres=server, database_url=database_url, env=env, logs=folder
    )
    deployment.manage("migrate", "--noinput")
    deployment.start_web()
    deployment.start_worker()
    return deployment


class Load:
    """Task posts and contributions on `url`, from `threads` threads until the block ends: every
    task and receipt answered 201 is kept, with when; any other answer (or none) is counted, and
    the loop goes on."""

    def __init__(self, url: str, threads: int = 2) -> None:
        self.url = url
        self.tasks: list[str] = []
        self.receipts: list[dict[str, Any]] = []
        self.other: Counter[str] = Counter()
        self.answered_at: list[float] = []  # monotonic instants of the 201s
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)

    def _post(
        self, client: httpx.Client, path: str, body: dict[str, Any], token: str = ""
    ) -> dict[str, Any] | None:
        headers = {"Idempotency-Key": str(uuid.uuid4())}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        try:
            answer = client.post(f"{self.url}{path}", json=body, headers=headers)
        except httpx.HTTPError as error:
            answer = None
            outcome = type(error).__name__
        else:
            outcome = str(answer.status_code)
        if answer is None or answer.status_code != 201:
            with self._lock:
                self.other[outcome] += 1
            time.sleep(0.1)
            return None
        with self._lock:
            self.answered_at.append(time.monotonic())
        return answer.json()

    def _token(self, client: httpx.Client) -> str:
        while not self._stop.is_set():
            registered = self._post(client, "/api/agent/register", {})
            if registered is not None:
                return registered["token"]
        return ""

    def _run(self) -> None:
        with httpx.Client(timeout=15) as client:
            poster, *contributors = (self._token(client) for _ in range(3))
            while not self._stop.is_set():
                posted = self._post(client, "/api/a2a-tasks", open_task_payload(), poster)
                if posted is None:
                    continue
                task_id = posted["task"]["id"]
                with self._lock:
                    self.tasks.append(task_id)
                for contributor in contributors:
                    path = f"/api/a2a-tasks/{task_id}/contributions"
                    answered = self._post(client, path, contribution_payload(), contributor)
                    if answered is not None:
                        with self._lock:
                            self.receipts.append(answered["receipt"])

    def wait_receipts(self, count: int, within_s: float = 120) -> None:
        """Until `count` receipts in all are kept."""
        give_up = time.monotonic() + within_s
        while len(self.receipts) < count:
            assert time.monotonic() < give_up, (
                f"{len(self.receipts)} receipts of {count}; other answers {dict(self.other)}"
            )
            time.sleep(0.2)

    def first_answer_after(self, instant: float, within_s: float = 60) -> float:
        """The first 201 after the monotonic `instant`."""
        give_up = time.monotonic() + within_s
        while True:
            with self._lock:
                later = [at for at in self.answered_at if at > instant]
            if later:
                return min(later)
            assert time.monotonic() < give_up, f"no write answered; {dict(self.other)}"
            time.sleep(0.1)


@dataclass(frozen=True)
class Checkpoint:
    text: str
    size: int
    root: bytes
    cosigned: bool  # by the witness


def checkpoint(site: str, witness: Witness, log: str = "/api/log") -> Checkpoint:
    """The latest checkpoint of the site's log served under `log` (log 0's by default)."""
    text = httpx.get(f"{site}{log}/checkpoint", timeout=10).text
    note = note_parse(text)
    body = checkpoint_body_parse(note.body)
    return Checkpoint(text, body.tree_size, body.root, note.signed_by(witness.key) is not None)


def wait_cosigned(
    site: str, witness: Witness, *, beyond: int, log: str = "/api/log", within_s: float = 90
) -> Checkpoint:
    """The latest checkpoint of the site's log under `log` once it is larger than `beyond` and
    cosigned by the witness."""
    give_up = time.monotonic() + within_s
    while True:
        try:
            latest = checkpoint(site, witness, log)
        except (httpx.HTTPError, ValueError):
            latest = None
        if latest is not None and latest.size > beyond and latest.cosigned:
            return latest
        assert time.monotonic() < give_up, f"no checkpoint beyond {beyond} cosigned: {latest}"
        time.sleep(0.5)


def assert_extends(site: str, old: Checkpoint, new: Checkpoint) -> None:
    """`new` is `old`'s tree with entries appended: the site's consistency proof verifies."""
    answer = httpx.get(
        f"{site}/api/log/proof/consistency",
        params={"first": old.size, "second": new.size},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    proof = [bytes.fromhex(node) for node in answer.json()["hashes"]]
    assert consistency_verify(old.size, new.size, old.root, new.root, proof)


def _commitment(receipt: dict[str, Any]) -> str:
    opened = {"report_digest": receipt["report_digest"], "salt": receipt["salt"]}
    return "sha256:" + hashlib.sha256(rfc8785.dumps(opened)).hexdigest()


def _logged(site: str) -> tuple[set[str], dict[str, str]] | None:
    """The tasks and the contributions (with their commitments) under the latest checkpoint;
    None while the site does not answer (the database just back, say)."""
    latest = httpx.get(f"{site}/api/log/checkpoint", timeout=10)
    if latest.status_code != 200:
        return None
    size = checkpoint_body_parse(note_parse(latest.text).body).tree_size
    tasks, contributions = set(), {}
    for start in range(0, size, 1000):
        bounds = {"start": start, "end": min(size, start + 1000)}
        answer = httpx.get(f"{site}/api/log/entries", params=bounds, timeout=10)
        if answer.status_code != 200:
            return None
        for served in answer.json()["entries"]:
            entry = served["entry"]
            if entry["type"] == "cairn.log/task":
                tasks.add(entry["task_id"])
            elif entry["type"] == "cairn.log/contribution":
                contributions[entry["contribution_id"]] = entry["commitment"]
    return tasks, contributions


def assert_all_logged(
    site: str, tasks: list[str], receipts: list[dict[str, Any]], within_s: float = 90
) -> None:
    """Every task and every receipt answered is in the log, the receipt's commitment with it,
    once the sequencer has integrated what was queued."""
    give_up = time.monotonic() + within_s
    while True:
        logged_tasks, logged = _logged(site) or (set(), {})
        missing_tasks = [task for task in tasks if task not in logged_tasks]
        missing = [r for r in receipts if logged.get(r["contribution_id"]) != _commitment(r)]
        if not missing_tasks and not missing:
            return
        assert time.monotonic() < give_up, (
            f"{len(missing_tasks)} of {len(tasks)} tasks and {len(missing)} of {len(receipts)} "
            f"receipts answered 201 are not in the log, such as tasks {missing_tasks[:3]} and "
            f"contributions {[r['contribution_id'] for r in missing[:3]]}"
        )
        time.sleep(1)


def assert_never_rolled_back(site: str) -> None:
    """The site's rollback guard (SPEC §16.2) found nothing to stop for: the database holds every
    checkpoint the site signed and every tree its witness holds."""
    checks = httpx.get(f"{site}/readyz", timeout=10).json()["checks"]
    assert checks["log"] == {"ok": True}, checks
    assert "cairn_log_rolled_back 0.0" in httpx.get(f"{site}/metrics", timeout=10).text
