"""SPEC §15.8 end to end, with real processes: a site and three keypers (each a Cairn of its own,
threshold 2), a report sealed by the local MCP server and one sealed by `cairn_verify.py seal` and
sent through the official A2A SDK client. The site holds neither report before the deadline;
after it, the keypers release, the site's evaluation opens both, the local server asks for its
own contribution's releases when it next starts, and the verifier's `task` passes with the
keypers and witnesses it pinned from the card."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

import anyio
import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict, ParseDict

from core.canonical import canonical_digest
from core.clock import parse_instant
from ledger.verifier import VERIFIER
from tests.factories import contribution_report, deadline_in, open_task_payload, open_task_request
from tests.mcp.conftest import LOCAL_SERVER, LocalServer, call, connected
from tests.scripts import built

DEADLINE_S = 60


def verifier(site_url: str, home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(built(VERIFIER)), "--url", site_url, *args],
        env={"CAIRN_HOME": str(home), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


async def sdk_send(site_url: str, token: str, task_id: str, payload: dict) -> dict:
    """SendMessage with the data part through the official A2A client: the task's metadata."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        client = await ClientFactory(
            ClientConfig(httpx_client=http, streaming=False)
        ).create_from_url(site_url)
        message = Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            task_id=task_id,
            parts=[Part(data=ParseDict(payload, struct_pb2.Value()))],
        )
        async with client:
            events = [e async for e in client.send_message(SendMessageRequest(message=message))]
    assert events[0].WhichOneof("payload") == "task", events
    return MessageToDict(events[0].task)


def test_reports_sealed_by_the_local_server_and_by_the_verifier_open_after_the_deadline(
    keyper_site, tmp_path
):
    keypers, site = keyper_site(3, threshold=2)
    http = httpx.Client(base_url=site.url, timeout=30)
    posted = http.post(
        "/api/a2a-tasks",
        json=open_task_payload(open_task_request(deadline=deadline_in(DEADLINE_S))),
        headers=site.agent(),
    )
    assert posted.status_code == 201, posted.text
    task = posted.json()["task"]
    site.sequence()  # the task's entry and deadline under a checkpoint the keypers cosigned
    alice = LocalServer(
        home=tmp_path / "alice",
        env={"CAIRN_URL": site.url, "CAIRN_HOME": str(tmp_path / "alice")},
        script=built(LOCAL_SERVER),
    )
    report = contribution_report(
        summary="Sealed by the local MCP: the header is set on every call."
    )

    async def contribute():
        async with connected(alice) as (client,):
            await call(client, "cairn_local_set_consent", {"public_output": True})
            arguments = {"task_id": task["id"], "report": report}
            preview = await call(client, "cairn_a2a_contribute", arguments)
            digest = preview.data["public_output_digest"]
            sent = await call(
                client, "cairn_a2a_contribute", {**arguments, "public_output_digest": digest}
            )
            return preview, sent

    preview, sent = anyio.run(contribute)

    assert preview.data["form"] == "sealed" and preview.data["issues"] == []
    assert not sent.is_error, sent.data
    receipt = sent.data["receipt"]
    assert receipt["sealed"] == "keypers" and "salt" not in receipt
    kept_file = alice.home / "sealed" / f"{receipt['contribution_id']}.json"
    kept = json.loads(kept_file.read_text())
    assert stat.S_IMODE(kept_file.stat().st_mode) == 0o600
    assert kept["report"] == report and kept["commitment"] == receipt["commitment"]
    assert not list((alice.home / "sealed").glob("pending-*"))

    # The verifier seals another report for any client; the official SDK client sends it.
    bob = tmp_path / "bob"
    other = contribution_report(summary="Sealed by cairn_verify.py: the header is always set.")
    (tmp_path / "report.json").write_text(json.dumps(other))
    sealed = verifier(site.url, bob, "seal", task["id"], str(tmp_path / "report.json"))
    assert sealed.returncode == 0, sealed.stdout + sealed.stderr
    payload = json.loads(sealed.stdout)
    assert payload["schema"] == "cairn.task.contribution.sealed/0.1"
    token = site.agent()["Authorization"].removeprefix("Bearer ")
    sdk_task = anyio.run(sdk_send, site.url, token, task["id"], payload)
    bob_receipt = sdk_task["metadata"]["cairn"]["contribution"]
    assert bob_receipt["commitment"] == payload["commitment"]
    site.sequence()

    # Before the deadline nothing the site holds or shows has either report in it.
    for text in (report["summary"], other["summary"]):
        assert text.encode() not in site.database.read_bytes()
        assert text not in http.get(f"/api/a2a-tasks/{task['id']}").text

    # After the deadline and its minute: the keypers release, the site's worker evaluates.
    deadline = parse_instant(task["deadline"])
    time.sleep(max(0.0, (deadline + timedelta(seconds=61)).timestamp() - time.time()))
    site.shell("from tasks.keyper_sweep import tasks_evaluate_with_releases as s; s()")
    site.sequence()
    evaluated = http.get(f"/api/a2a-tasks/{task['id']}").json()
    items = evaluated["evaluation"]["contributions"]
    assert [item.get("report") for item in items] == [report, other], items
    assert evaluated["outcome"] == "resolved"

    # The local server, started again, asks the keypers for its own contribution's releases.
    async def next_session():
        async with connected(alice) as (client,):
            for _ in range(60):
                if json.loads(kept_file.read_text())["releases"]:
                    break
                await call(client, "cairn_local_status")
                await anyio.sleep(0.5)

    anyio.run(next_session)
    releases = json.loads(kept_file.read_text())["releases"]
    assert {r["keyper"] for r in releases} == {k.name for k in keypers}

    # The verifier, pinning the card's witnesses and keypers, checks it all.
    checked = verifier(site.url, tmp_path / "carol", "task", task["id"])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("opens with 3 signed releases to the published report") == 2
    (tmp_path / "receipt.json").write_text(json.dumps(receipt))
    disputed = verifier(
        site.url, tmp_path / "carol", "dispute", str(tmp_path / "receipt.json"), str(kept_file)
    )
    assert disputed.returncode == 0, disputed.stdout
    assert "there is nothing to dispute" in disputed.stdout
    assert canonical_digest(report) == items[0]["report_digest"]

    # A keeper who claims the keys of Alice's report were unavailable, publishing its sealed
    # shares but none of the releases: the verifier asks the keypers itself, and they released
    # within the grace.
    claimed = json.loads(json.dumps(evaluated))
    item = claimed["evaluation"]["contributions"][0]
    for name in ("report", "report_digest", "salt"):
        del item[name]
    item["void"] = {"code": "keys_unavailable", "message": "0 of the 2 releases came in"}
    item["sealed"] |= {"releases": [], "shares": kept["sealed"]["shares"]}
    (tmp_path / "claimed.json").write_text(json.dumps(claimed))
    checked = verifier(site.url, tmp_path / "carol", "task", str(tmp_path / "claimed.json"))
    assert checked.returncode == 1
    assert "WRONGFUL VOID: void as keys_unavailable, yet 3 keypers released" in checked.stdout
    http.close()
