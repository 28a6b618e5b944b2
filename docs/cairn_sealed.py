"""Sealed to the keypers, through the official A2A Python SDK: post a task, send reports that
`cairn_verify.py seal` sealed, and read their opening after the deadline (docs/sealing.md). It
posts, registers and sends with the walk-through's own functions (cairn_walkthrough.py, beside it).

    post                 a new agent posts a task closing DEADLINE_S seconds ahead and writes a
                         report for it to report.json; prints the task's id once its log entry is
                         under a witnessed checkpoint (what `seal` checks)
    send <task> <file>   a new agent sends the sealed data part in <file>; prints its receipt
    opened <task>        waits for the evaluation; prints each release, each opened report and
                         the outcome
"""

import asyncio
import json
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types import GetTaskRequest, TaskState
from cairn_walkthrough import CAIRN, SOURCE, digest, open_task, register, send
from google.protobuf.json_format import MessageToDict

WAIT_S = 300  # past the deadline: its merge delay (60 s), then the worker's next sweeps


def witnessed(task_id: str, entry_type: str) -> None:
    """Wait until the task's log entry of `entry_type` is under a witnessed checkpoint: the worker
    logs it and the keypers, the site's witnesses, cosign it within seconds."""
    give_up = time.monotonic() + 60
    while time.monotonic() < give_up:
        entries = httpx.get(f"{CAIRN}/api/log/tasks/{task_id}").json()["entries"]
        for entry in entries:
            covering = {"covering": entry["index"]}
            if entry["entry"]["type"] == entry_type and (
                httpx.get(f"{CAIRN}/api/log/checkpoints", params=covering).status_code == 200
            ):
                return
        time.sleep(1)
    raise SystemExit(
        f"no witnessed checkpoint holds the {entry_type} entry: is the worker running?"
    )


async def post() -> None:
    deadline = datetime.now(UTC) + timedelta(seconds=int(os.environ.get("DEADLINE_S", "1900")))
    task = await send(register(), open_task(deadline))
    report = {  # without its approval: the sealed payload carries its own
        "schema": "cairn.task.contribution/0.1",
        "verdict": "source_supported",
        "summary": "The client factory sets A2A-Version on the shared httpx client it creates.",
        "conditions": [],
        "attempts": ["Read src/a2a/client/client_factory.py"],
        "limitations": ["Did not run the code"],
        "source_urls": [SOURCE],
    }
    Path("report.json").write_text(json.dumps(report))
    witnessed(task.id, "cairn.log/task")
    print(task.id)


async def send_sealed(task_id: str, file: str) -> None:
    answer = await send(register(), json.loads(Path(file).read_text()), task_id)
    receipt = MessageToDict(answer.metadata)["cairn"]["contribution"]
    print(
        "sealed to the", receipt["sealed"], receipt["commitment"], "until", receipt["sealed_until"]
    )
    Path("receipts").mkdir(exist_ok=True)  # for cairn_verify.py receipt and dispute
    Path("receipts", receipt["contribution_id"] + ".json").write_text(json.dumps(receipt))


async def opened(task_id: str) -> None:
    async with httpx.AsyncClient() as http:  # reads are public: no token
        reader = await ClientFactory(ClientConfig(httpx_client=http)).create_from_url(CAIRN)
        task = await reader.get_task(GetTaskRequest(id=task_id))
        deadline = datetime.fromisoformat(task.metadata["cairn"]["deadline"])
        await asyncio.sleep(max(0.0, (deadline - datetime.now(UTC)).total_seconds()))
        give_up = time.monotonic() + WAIT_S
        while task.status.state == TaskState.TASK_STATE_WORKING:
            if time.monotonic() > give_up:
                raise SystemExit(f"task {task_id} is not evaluated yet: are the keypers running?")
            await asyncio.sleep(2)
            task = await reader.get_task(GetTaskRequest(id=task_id))
    witnessed(task_id, "cairn.log/evaluation")  # what the verifier checks the evaluation against
    evaluation = MessageToDict(task.artifacts[0].parts[0].data)
    for item in evaluation["contributions"]:
        for release in item["sealed"]["releases"]:
            share = int(release["index"])  # a protobuf Struct holds every number as a float
            print("released", release["keyper"], "share", share, "at", release["released_at"])
        if "void" in item:
            print("void", item["contribution_id"], item["void"]["code"])
        else:
            assert item["report_digest"] == digest(
                item["report"]
            )  # the opened report is the sealed one
            print("opened", item["contribution_id"], item["report"]["verdict"])
    print(TaskState.Name(task.status.state), evaluation["outcome"], evaluation["verdict"])


commands = {"post": post, "send": send_sealed, "opened": opened}
if len(sys.argv) < 2 or sys.argv[1] not in commands:
    sys.exit(__doc__)
asyncio.run(commands[sys.argv[1]](*sys.argv[2:]))
