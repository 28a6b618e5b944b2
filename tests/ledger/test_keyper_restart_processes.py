"""SPEC §15.8 across §16.2's restart, with real processes: a site and three keypers, each a Cairn
of its own. Reports are sealed with the served verifier's `seal` and sent through the site's HTTP
route: one before the database went back, one after `manage.py log_restart` to the same task
(whose entry stays in log 0 while the contribution's is in log 1), and one to a task posted in log
1; the built local MCP server seals one to each task after the restart too. Past the deadline the
site's own sweep asks the keypers, each entry proven in the log that holds it against a root the
keyper cosigned; every report opens, the local server, started again, gets the keypers' releases
of its own two, and the served verifier passes the task, the keys' releases and every log in
full."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx

from core.clock import format_instant, parse_instant
from ledger.signed_note import ED25519, private_verifier_key
from tests.factories import contribution_report, deadline_in, open_task_payload, open_task_request
from tests.ledger.keyper_processes import KeyperProcess, SiteProcess
from tests.mcp.conftest import LOCAL_SERVER, LocalServer, call, connected
from tests.scripts import built

SWEEP = "from tasks.jobs import evaluate_due; print('EVALUATED', evaluate_due())"


class Verifier:
    """The verifier as the site serves it, with its own CAIRN_HOME."""

    def __init__(self, site: SiteProcess, folder: Path) -> None:
        self.script = folder / "cairn_verify.py"
        self.script.write_text(httpx.get(f"{site.url}/verify/cairn_verify.py").text)
        self.folder = folder

    def __call__(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, str(self.script), *args],
            env={"CAIRN_HOME": str(self.folder / "home"), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=120,
        )

    def sealed_sent(self, http: httpx.Client, site: SiteProcess, task_id: str, name: str) -> str:
        """Seal a report for the task as a client does, send it, and give its contribution id."""
        report = self.folder / f"{name}.json"
        report.write_text(json.dumps(contribution_report(summary=f"Report {name}: it holds.")))
        sealed = self("seal", task_id, str(report), "--keep", str(self.folder / f"{name}.kept"))
        assert sealed.returncode == 0, sealed.stdout + sealed.stderr
        payload = json.loads(sealed.stdout)
        sent = http.post(
            f"/api/a2a-tasks/{task_id}/contributions", json=payload, headers=site.agent()
        )
        assert sent.status_code == 201, sent.text
        return sent.json()["receipt"]["contribution_id"]


def _post_task(http: httpx.Client, site: SiteProcess, deadline: datetime) -> str:
    payload = open_task_payload(open_task_request(deadline=format_instant(deadline)))
    posted = http.post("/api/a2a-tasks", json=payload, headers=site.agent())
    assert posted.status_code == 201, posted.text
    return posted.json()["task"]["id"]


def _local_sealed(local: LocalServer, task_ids: list[str]) -> list[str]:
    """A report sealed by the local MCP server to each task, as a coding agent sends it: the
    contribution ids of their receipts."""

    async def contribute() -> list[str]:
        sent = []
        async with connected(local) as (client,):
            await call(client, "cairn_local_set_consent", {"public_output": True})
            for task_id in task_ids:
                report = contribution_report(summary=f"Report by the local MCP for {task_id}.")
                arguments = {"task_id": task_id, "report": report}
                preview = await call(client, "cairn_a2a_contribute", arguments)
                assert preview.data["form"] == "sealed", preview.data
                digest = preview.data["public_output_digest"]
                answer = await call(
                    client, "cairn_a2a_contribute", {**arguments, "public_output_digest": digest}
                )
                assert not answer.is_error, answer.data
                sent.append(answer.data["receipt"]["contribution_id"])
        return sent

    return anyio.run(contribute)


def _local_releases(local: LocalServer, contribution_ids: list[str]) -> dict[str, set[str]]:
    """The local server started again, which asks the keypers for its own releases: the
    keypers whose release of each it kept."""
    files = [local.home / "sealed" / f"{c}.json" for c in contribution_ids]

    async def next_session() -> None:
        async with connected(local) as (client,):
            for _ in range(120):
                if all(json.loads(f.read_text())["releases"] for f in files):
                    break
                await call(client, "cairn_local_status")
                await anyio.sleep(0.5)

    anyio.run(next_session)
    return {
        c: {r["keyper"] for r in json.loads(f.read_text())["releases"]}
        for c, f in zip(contribution_ids, files, strict=True)
    }


def _keypers_follow(keypers: list[KeyperProcess], site: SiteProcess, origin: str) -> None:
    """Each keyper's operator adds the new log to those it witnesses, as the command asks."""
    new_key = private_verifier_key(origin, site.site_key, type=ED25519).text
    for keyper in keypers:
        keyper.stop()
        keyper.env["CAIRN_WITNESSED_LOGS"] = f"{site.log_key}\n{new_key}"
        keyper.serve()
    for keyper in keypers:
        keyper.ready()


def test_sealed_reports_before_and_after_a_restart_open_and_verify(keyper_site, tmp_path):
    keypers, site = keyper_site(3, threshold=2)
    http = httpx.Client(base_url=site.url, timeout=30)
    verify = Verifier(site, tmp_path)
    # Twelve processes run before the deadline (sequencer runs, the rollback, the restart, the
    # keypers restarted, the verifier sealing three times and the local server twice): on a busy
    # machine, minutes.
    deadline = parse_instant(deadline_in(240))
    older = _post_task(http, site, deadline)
    site.sequence()
    before = verify.sealed_sent(http, site, older, "before")
    site.sequence()  # a checkpoint of 2 entries, which the database will still hold
    _post_task(http, site, deadline + timedelta(hours=1))
    site.sequence()

    # The database goes back to the first two entries: the second task's entry is lost.
    site.shell("from tests.ledger.keeper import log_rolled_back; log_rolled_back(2)")
    site.sequence()
    restarted_log = f"{site.host}/cairn/log/1"
    _keypers_follow(keypers, site, restarted_log)
    restarted = site.shell("from django.core.management import call_command as c; c('log_restart')")
    assert f"started {restarted_log}" in restarted
    newer = _post_task(http, site, deadline)
    site.sequence()
    after = verify.sealed_sent(http, site, older, "after")
    in_new_log = verify.sealed_sent(http, site, newer, "in the new log")
    alice = LocalServer(
        home=tmp_path / "alice",
        env={"CAIRN_URL": site.url, "CAIRN_HOME": str(tmp_path / "alice")},
        script=built(LOCAL_SERVER),
    )
    by_local = _local_sealed(alice, [older, newer])
    site.sequence()
    entries = {
        path: http.get(f"{path}/tasks/{older}").json()["entries"]
        for path in ("/api/log", "/api/log/1")
    }
    assert [e["entry"]["type"] for e in entries["/api/log"]] == [
        "cairn.log/task",
        "cairn.log/contribution",
    ]
    assert [e["entry"]["contribution_id"] for e in entries["/api/log/1"]] == [after, by_local[0]]
    assert time.time() < deadline.timestamp(), "too slow: the tasks closed before their reports"

    time.sleep(max(0.0, (deadline + timedelta(seconds=60.5)).timestamp() - time.time()))
    evaluated = site.shell(SWEEP)
    assert "EVALUATED 2" in evaluated, evaluated
    site.sequence()  # the evaluation entries under a witnessed checkpoint
    for task_id, sent in (
        (older, [before, after, by_local[0]]),
        (newer, [in_new_log, by_local[1]]),
    ):
        view: dict[str, Any] = http.get(f"/api/a2a-tasks/{task_id}").json()
        assert view["state"] == "evaluated", view
        items = view["evaluation"]["contributions"]
        assert [item["contribution_id"] for item in items] == sent
        for item in items:
            assert "void" not in item, item
            assert item["report"]["summary"].startswith("Report "), item
            assert len(item["sealed"]["releases"]) >= 2
    keyper_names = {keyper.name for keyper in keypers}
    assert _local_releases(alice, by_local) == dict.fromkeys(by_local, keyper_names)

    for task_id in (older, newer):
        checked = verify("task", task_id)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "opens with" in checked.stdout and "FAIL" not in checked.stdout
    full = verify("log", "--full")
    assert full.returncode == 0, full.stdout + full.stderr
    assert f"every entry of {site.origin} (2 entries)" in full.stdout
    assert f"every entry of {restarted_log} (" in full.stdout
    http.close()
