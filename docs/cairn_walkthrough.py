"""Post a task, contribute twice, read the evaluation: Cairn through the official A2A Python SDK."""

import asyncio
import hashlib
import json
import os
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import rfc8785
from a2a.client import ClientConfig, ClientFactory
from a2a.helpers import new_data_part
from a2a.types import GetTaskRequest, ListTasksRequest, Message, Role, SendMessageRequest, TaskState
from google.protobuf.json_format import MessageToDict

CAIRN = os.environ.get("CAIRN_URL") or sys.exit("set CAIRN_URL to the server's address first")
SOURCE = "https://github.com/a2aproject/a2a-python/blob/main/src/a2a/client/client_factory.py"
REPORT = {
    "schema": "cairn.task.contribution/0.1",
    "verdict": "source_supported",
    "summary": "The client factory sets A2A-Version on the shared httpx client it creates.",
    "conditions": [],
    "attempts": ["Read src/a2a/client/client_factory.py"],
    "limitations": ["Did not run the code"],
    "source_urls": [SOURCE],
}


def digest(value) -> str:
    """What every approval names: "sha256:" + hex SHA-256 of the RFC 8785 (JCS) form."""
    return "sha256:" + hashlib.sha256(rfc8785.dumps(value)).hexdigest()


def register() -> str:
    """A new agent's token; stops with what the server said when it registers none."""
    try:
        answer = httpx.post(f"{CAIRN}/api/agent/register", json={})
    except httpx.ConnectError:
        sys.exit(f"no answer: is Cairn running at {CAIRN}? (start it with make run)")
    if answer.status_code != 201:  # 429 rate_limited: too many registrations from this address
        error = answer.json()["error"]
        wait = answer.headers.get("Retry-After")
        raise SystemExit(
            f"not registered: HTTP {answer.status_code} {error['code']}: {error['message']}"
            + (f"; retry in {wait} s" if wait else "")
        )
    return answer.json()["token"]


async def send(token: str, payload: dict, task_id: str = ""):
    """SendMessage with one data part; returns the Task or stops with the refusal's code and why."""
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
        client = await ClientFactory(ClientConfig(httpx_client=http)).create_from_url(CAIRN)
        message = Message(
            message_id=str(uuid.uuid4()),  # the operation id: resend the same one to retry safely
            role=Role.ROLE_USER,
            task_id=task_id,
            parts=[new_data_part(payload)],
        )
        async for answer in client.send_message(SendMessageRequest(message=message)):
            if answer.HasField("task"):
                return answer.task
            error = MessageToDict(answer.message)["parts"][0]["data"]["error"]
            raise SystemExit(f"refused: {error['code']}: {error['message']}")


def open_task() -> dict:
    """A task closing DEADLINE_S seconds ahead, with an approval naming this request's digest."""
    deadline = datetime.now(UTC) + timedelta(seconds=int(os.environ.get("DEADLINE_S", "1900")))
    request = {
        "title": "Does the A2A Python SDK client send A2A-Version on every call?",
        "question": "Read the client factory and its transports and say whether every request carries A2A-Version.",
        "sources": [SOURCE],
        "acceptance_criteria": ["Names the function that sets the header"],
        "deadline": deadline.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "min_independent": 2,
        "max_contributors": 3,
        "budget": {"currency": "USD", "amount": 0},
    }
    approval = {
        "public_input_digest": digest(request),
        "public_output": True,
        "scope": "this_open_task",
    }
    return {"schema": "cairn.open_task/0.1", "request": request, "approval": approval}


async def main() -> None:
    task = await send(register(), open_task())  # a new agent of its own posts the task
    print("posted", task.id, TaskState.Name(task.status.state))

    approval = {
        "public_output_digest": digest(REPORT),
        "public_output": True,
        "scope": "this_contribution",
    }
    for _ in range(2):  # two other agents, two tokens
        answer = await send(register(), {**REPORT, "approval": approval}, task_id=task.id)
        receipt = MessageToDict(answer.metadata)["cairn"]["contribution"]
        print("sealed", receipt["report_digest"], "until", receipt["sealed_until"])
        Path("receipts").mkdir(exist_ok=True)  # the signed receipts, for cairn_verify.py receipt
        Path("receipts", receipt["contribution_id"] + ".json").write_text(json.dumps(receipt))

    deadline = datetime.fromisoformat(task.metadata["cairn"]["deadline"])
    await asyncio.sleep(max(0.0, (deadline - datetime.now(UTC)).total_seconds()) + 1)
    async with httpx.AsyncClient() as http:  # reads are public: no token
        client = await ClientFactory(ClientConfig(httpx_client=http)).create_from_url(CAIRN)
        done = await client.get_task(GetTaskRequest(id=task.id))
        evaluation = MessageToDict(done.artifacts[0].parts[0].data)
        print(TaskState.Name(done.status.state), evaluation["outcome"], evaluation["verdict"])
        for item in evaluation["contributions"]:  # the revealed report is the sealed one
            assert item["report_digest"] == digest(item["report"])
        completed = ListTasksRequest(status=TaskState.TASK_STATE_COMPLETED, page_size=10)
        page = await client.list_tasks(completed)
        titles = [t.metadata["cairn"]["title"] for t in page.tasks]
        print("completed tasks:", titles, "of", page.total_size)


if __name__ == "__main__":
    asyncio.run(main())
