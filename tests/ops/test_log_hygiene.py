"""SPEC §16: logs hold no secret (no token, no `Authorization` value, no query string) and a
client's mistakes, refused CSRF checks included, are INFO. Through the processes an operator runs:
`python -m cairn.serve` and `manage.py qcluster`, in each log format."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.deploy.postgres import free_port
from tests.factories import open_task_payload

ROOT = Path(__file__).resolve().parents[2]
QUERY_MARK = "query-string-mark"


@dataclass
class Site:
    url: str
    web_log: Path
    worker_log: Path
    log_format: str

    def lines(self) -> list[str]:
        return [
            line
            for log in (self.web_log, self.worker_log)
            for line in log.read_text(errors="replace").splitlines()
            if line.strip()
        ]

    def level_of(self, line: str) -> str:
        if self.log_format == "json":
            return json.loads(line)["level"]
        return line.split()[2]  # "date time LEVEL logger [pid] message"

    def is_record(self, line: str) -> bool:
        """A line the logging configuration wrote (not, say, a Python warning printed as is)."""
        if self.log_format == "json":
            return line.startswith("{")
        return re.match(r"\d{4}-\d\d-\d\d ", line) is not None


def _spawn(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _stop(process: subprocess.Popen) -> None:
    for sent in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sent)
            process.wait(timeout=15)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def _wait_for(predicate, what: str, timeout: float = 120) -> None:
    give_up = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < give_up, what
        time.sleep(0.2)


@pytest.fixture(params=["json", "text"])
def site(request, tmp_path, migrated_sqlite) -> Iterator[Site]:
    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith("CAIRN_") and k not in {"DATABASE_URL", "DEBUG", "ALLOWED_HOSTS"}
        },
        "PYTHONUNBUFFERED": "1",
        "DEBUG": "false",
        "SECRET_KEY": "cairn-log-hygiene-test",
        "ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'cairn.sqlite3'}",
        "CAIRN_ENV_FILE": os.devnull,
        "CAIRN_LOG_FORMAT": request.param,
        "CAIRN_METRICS_TOKEN": "scrape-secret",
        "CAIRN_SIGNING_KEY": os.environ["CAIRN_SIGNING_KEY"],
        "CAIRN_SEAL_KEY": os.environ["CAIRN_SEAL_KEY"],
    }
    shutil.copyfile(migrated_sqlite, tmp_path / "cairn.sqlite3")
    port = free_port()
    site = Site(
        f"http://127.0.0.1:{port}", tmp_path / "web.log", tmp_path / "worker.log", request.param
    )
    web = _spawn([sys.executable, "-m", "cairn.serve", "--port", str(port)], env, site.web_log)
    worker = _spawn([sys.executable, "manage.py", "qcluster"], env, site.worker_log)
    try:

        def serving() -> bool:
            try:
                return httpx.get(f"{site.url}/healthz", timeout=1).status_code == 200
            except httpx.TransportError:
                return False

        _wait_for(serving, f"the web process did not start:\n{site.web_log.read_text()}")
        _wait_for(
            lambda: "Processed" in site.worker_log.read_text(errors="replace"),
            f"the worker ran nothing:\n{site.worker_log.read_text()}",
        )
        yield site
    finally:
        _stop(web)
        _stop(worker)


def test_no_token_or_query_string_in_any_log_line_and_client_mistakes_at_info(site):
    with httpx.Client(base_url=site.url, timeout=20) as client:
        token = client.post("/api/agent/register", json={"label": "log hygiene"}).json()["token"]
        bearer = {"Authorization": f"Bearer {token}"}
        near_miss = {"Authorization": f"Bearer {token[:-1]}x"}
        requests = [
            ("GET", "/no-such-page", {}),
            ("GET", f"/api/a2a-tasks/{uuid.uuid4()}", {}),
            ("GET", f"/api/a2a-tasks/{token}", {}),
            ("GET", "/api/a2a-tasks/mine", {}),
            ("GET", "/api/a2a-tasks/mine", {"headers": near_miss}),
            ("GET", "/api/a2a-tasks", {"params": {"cursor": "not-a-cursor"}}),
            ("POST", "/api/a2a-tasks", {"content": b"{not json"}),
            ("POST", "/api/a2a-tasks", {"json": open_task_payload()}),
            ("DELETE", "/api/agent/register", {}),
            ("GET", "/metrics", {}),
            ("POST", "/admin/login/", {"data": {"username": "keeper", "password": token}}),
            (
                "POST",
                "/api/a2a",
                {
                    "headers": {**bearer, "A2A-Version": "1.0"},
                    "content": b'{"jsonrpc": "2.0", "id": 1, "method": 5}',
                },
            ),
            (
                "POST",
                "/api/a2a",
                {"json": {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": "x"}}},
            ),
            (
                "POST",
                "/api/a2a",
                {
                    "headers": {**bearer, "A2A-Version": "9.9"},
                    "json": {"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": "x"}},
                },
            ),
            ("POST", "/api/mcp", {"content": b"{not json"}),
            ("GET", "/.well-known/agent-card.json", {}),
        ]
        answered: dict[str, set[int]] = {}
        for method, path, options in requests:
            for query in ({}, {"token": token, "note": QUERY_MARK}):
                sent = {"headers": bearer, **options}
                sent["params"] = {**options.get("params", {}), **query}
                response = client.request(method, path, **sent)
                answered.setdefault(path, set()).add(response.status_code)
    assert {404, 400, 401, 403, 405, 201} <= set().union(*answered.values()), answered
    assert answered["/admin/login/"] == {403}, answered
    # The worker runs what the posted task gave it (the transparency log's sequencer).
    _wait_for(
        lambda: site.worker_log.read_text(errors="replace").count("Processed") >= 2,
        f"the worker ran nothing after the requests:\n{site.worker_log.read_text()}",
    )
    time.sleep(0.5)

    lines = site.lines()
    assert any("Not Found: /no-such-page" in line for line in lines), lines
    leaking = [line for line in lines if token in line or QUERY_MARK in line or "token=" in line]
    assert not leaking, leaking
    csrf = [line for line in lines if "django.security.csrf" in line]
    assert csrf, lines
    assert {site.level_of(line) for line in csrf} == {"INFO"}
    # Every request above is a client's mistake: none is logged as the server's fault.
    alarming = [
        line for line in lines if site.is_record(line) and site.level_of(line) not in ("INFO",)
    ]
    assert not alarming, alarming
    refusals = [line for line in lines if "django.request" in line]
    assert len(refusals) >= 10, lines
    assert {site.level_of(line) for line in refusals} == {"INFO"}
