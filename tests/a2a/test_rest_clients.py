"""SPEC §8.6: the HTTP+JSON binding through the official clients, each allowed no other binding:
`a2a-sdk` 1.3.0 (Python) and `@a2a-js/sdk` 1.3.0 (tests/a2a/js, run with node as in
test_js_client.py). Each posts a task and replays it, contributes twice, is refused with a
Message, reads an evaluation, lists with a filter and a page token, and cannot cancel."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Task,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskState,
)
from a2a.utils.constants import TransportProtocol
from google.protobuf.json_format import MessageToDict

from agents.models import AuditEntry
from tasks.models import Task as TaskRow
from tests.a2a.conftest import JS_DIR, as_json, run, run_node, sdk_send
from tests.factories import (
    contribution_payload,
    contribution_report,
    open_task_payload,
    open_task_request,
)

REFUSED = open_task_payload(open_task_request(sources=["https://example.com/not-allowed"]))


@asynccontextmanager
async def rest_client(
    live_url: str, requests: list[str], token: str | None = None
) -> AsyncIterator[Client]:
    """An a2a-sdk client from the served card that may speak HTTP+JSON only; `requests` collects
    what it sent."""

    async def note(request: httpx.Request) -> None:
        requests.append(f"{request.method} {request.url.path}")

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(
        headers=headers, timeout=20, event_hooks={"request": [note]}
    ) as http_client:
        config = ClientConfig(
            httpx_client=http_client,
            supported_protocol_bindings=[TransportProtocol.HTTP_JSON.value],
        )
        client = await ClientFactory(config).create_from_url(live_url)
        async with client:
            yield client


def _evaluation(task: dict[str, Any]) -> dict[str, Any]:
    (artifact,) = task["artifacts"]
    return as_json(artifact["parts"][0]["data"])


def test_the_python_sdk_over_http_json(live_url, poster, make_agent, evaluated_id, post_task):
    post_task(make_agent())  # a second open task, so the list has a second page
    requests: list[str] = []
    post_id, payload = str(uuid.uuid4()), open_task_payload()
    contributors = [make_agent().token for _ in range(2)]

    async def scenario() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with rest_client(live_url, requests, poster.token) as client:
            seen["posted"] = await sdk_send(client, payload, message_id=post_id)
            seen["replayed"] = await sdk_send(client, payload, message_id=post_id)
            seen["refusal"] = await sdk_send(client, REFUSED)
        task_id = seen["posted"].id
        seen["contributions"] = []
        reports = (contribution_report(), contribution_report(verdict="source_unclear"))
        for token, report in zip(contributors, reports, strict=True):
            async with rest_client(live_url, requests, token) as client:
                seen["contributions"].append(
                    await sdk_send(client, contribution_payload(report), task_id=task_id)
                )
        async with rest_client(live_url, requests) as client:
            seen["evaluated"] = await client.get_task(GetTaskRequest(id=evaluated_id))
            working = ListTasksRequest(status=TaskState.TASK_STATE_WORKING, page_size=1)
            seen["first"] = await client.list_tasks(working)
            working.page_token = seen["first"].next_page_token
            seen["second"] = await client.list_tasks(working)
            with pytest.raises(TaskNotCancelableError):
                await client.cancel_task(CancelTaskRequest(id=task_id))
            with pytest.raises(TaskNotFoundError):
                await client.get_task(GetTaskRequest(id=str(uuid.uuid4())))
        return seen

    seen = run(scenario())

    posted, replayed = seen["posted"], seen["replayed"]
    assert isinstance(posted, Task) and posted.status.state == TaskState.TASK_STATE_WORKING
    assert MessageToDict(replayed) == MessageToDict(posted)
    assert TaskRow.objects.filter(pk=posted.id).count() == 1
    assert [
        as_json(MessageToDict(answer.metadata))["cairn"]["contributions_received"]
        for answer in seen["contributions"]
    ] == [1, 2]
    refusal = seen["refusal"]
    assert isinstance(refusal, Message)
    assert MessageToDict(refusal)["parts"][0]["data"]["error"]["code"] == "source_not_allowed"
    evaluation = _evaluation(MessageToDict(seen["evaluated"]))
    assert evaluation["outcome"] == "resolved" and evaluation["counts"]["source_supported"] == 2
    first, second = seen["first"], seen["second"]
    assert (first.total_size, first.page_size, len(first.tasks)) == (2, 1, 1)
    assert first.tasks[0].id == posted.id and first.next_page_token
    assert len(second.tasks) == 1 and second.tasks[0].id != posted.id
    assert second.next_page_token == ""
    assert requests and all(
        request.startswith(("GET /.well-known/agent-card.json", "GET /api/a2a/", "POST /api/a2a/"))
        for request in requests
    ), requests
    assert {"POST /api/a2a/message:send", "GET /api/a2a/tasks"} <= set(requests)
    assert AuditEntry.objects.get(object_id=posted.id).door == "a2a"


def test_the_js_sdk_over_http_json(node, live_url, poster, make_agent, evaluated_id, post_task):
    post_task(make_agent())  # a second open task, so the list has a second page
    reports = [contribution_report(), contribution_report(verdict="source_unclear")]
    flow = {
        "base": live_url,
        "posterToken": poster.token,
        "contributorTokens": [make_agent().token for _ in reports],
        "post": open_task_payload(),
        "contributions": [contribution_payload(report) for report in reports],
        "refused": REFUSED,
        "evaluatedId": evaluated_id,
    }

    seen = run_node(node, JS_DIR, "cairn_rest_flow.mjs", flow)

    posted = seen["posted"]
    assert posted["status"]["state"] == 2 and seen["replayed"] == posted  # TASK_STATE_WORKING
    assert TaskRow.objects.filter(pk=posted["id"]).count() == 1
    assert [
        as_json(answer["metadata"]["cairn"])["contributions_received"]
        for answer in seen["contributions"]
    ] == [1, 2]
    refusal = seen["refusal"]
    assert refusal["role"] == 2 and refusal["metadata"] == {"cairn": {"accepted": False}}
    assert refusal["parts"][0]["content"]["value"]["error"]["code"] == "source_not_allowed"
    evaluated = seen["evaluated"]
    assert evaluated["status"]["state"] == 3  # TASK_STATE_COMPLETED
    evaluation = as_json(evaluated["artifacts"][0]["parts"][0]["content"]["value"])
    assert evaluation["outcome"] == "resolved"
    first, second = seen["firstPage"], seen["secondPage"]
    assert first["totalSize"] == 2 and first["pageSize"] == 1 and first["nextPageToken"]
    assert [task["id"] for task in first["tasks"]] == [posted["id"]]
    assert len(second["tasks"]) == 1 and second["nextPageToken"] == ""
    assert seen["cancel"]["reason"] == "TASK_NOT_CANCELABLE"
    assert seen["missing"]["reason"] == "TASK_NOT_FOUND"
    assert "Bearer token" in seen["unauthorized"]["message"]
    assert seen["cardVerified"] is True
    assert all(
        request.startswith(("GET /.well-known/agent-card.json", "GET /api/a2a/", "POST /api/a2a/"))
        for request in seen["requests"]
    ), seen["requests"]
