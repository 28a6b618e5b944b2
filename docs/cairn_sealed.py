"""The sealing demo of docs/sealing.md, through the A2A Python SDK and cairn_walkthrough.py:

post                 a new agent posts a task closing DEADLINE_S seconds ahead, writes its report
                     to report.json; prints the task id when its entry is witnessed (`seal` checks)
send <task> <file>   a new agent sends the sealed data part in <file>; prints its receipt
opened <task>        waits for the evaluation; prints each release, opened report and outcome
"""

import asyncio
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types import GetTaskRequest, TaskState
from cairn_walkthrough import CAIRN, REPORT, digest, open_task, register, send
from google.protobuf.json_format import MessageToDict


def witnessed(task_id: str, entry_type: str) -> None:
    """Wait until the task's `entry_type` log entry is under a checkpoint the keypers cosigned."""
    give_up = time.monotonic() + 60
    while time.monotonic() < give_up:
        for entry in httpx.get(f"{CAIRN}/api/log/tasks/{task_id}").json()["entries"]:
            if entry["entry"]["type"] == entry_type:
                covering = {"covering": entry["index"]}
                if httpx.get(f"{CAIRN}/api/log/checkpoints", params=covering).status_code == 200:
                    return
        time.sleep(1)
    sys.exit(f"no witnessed checkpoint holds the {entry_type} entry: is the worker running?")


async def post() -> None:
    task = await send(register(), open_task())
    # The report without its approval: the sealed payload carries its own.
    Path("report.json").write_text(json.dumps(REPORT))
    witnessed(task.id, "cairn.log/task")
    print(task.id)


async def send_sealed(task_id: str, file: str) -> None:
    answer = await send(register(), json.loads(Path(file).read_text()), task_id)
    receipt = MessageToDict(answer.metadata)["cairn"]["contribution"]
    print("sealed to the {sealed} {commitment} until {sealed_until}".format(**receipt))
    Path("receipts").mkdir(exist_ok=True)  # for cairn_verify.py receipt and dispute
    Path("receipts", receipt["contribution_id"] + ".json").write_text(json.dumps(receipt))


async def opened(task_id: str) -> None:
    async with httpx.AsyncClient() as http:  # reads are public: no token
        reader = await ClientFactory(ClientConfig(httpx_client=http)).create_from_url(CAIRN)
        task = await reader.get_task(GetTaskRequest(id=task_id))
        deadline = datetime.fromisoformat(task.metadata["cairn"]["deadline"])
        await asyncio.sleep(max(0.0, (deadline - datetime.now(UTC)).total_seconds()))
        give_up = time.monotonic() + 300  # the deadline's merge delay (60 s), then sweeps
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
        else:  # the opened report is the sealed one
            assert item["report_digest"] == digest(item["report"])
            print("opened", item["contribution_id"], item["report"]["verdict"])
    print(TaskState.Name(task.status.state), evaluation["outcome"], evaluation["verdict"])


commands = {"post": post, "send": send_sealed, "opened": opened}
if len(sys.argv) < 2 or sys.argv[1] not in commands:
    sys.exit(__doc__)
asyncio.run(commands[sys.argv[1]](*sys.argv[2:]))
