"""Fixtures for the A2A door: raw JSON-RPC over httpx, and the official a2a-sdk client, both
against the live server."""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import time_machine
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.helpers import new_data_part
from a2a.types import Message, Role, SendMessageRequest, Task
from django.utils import timezone

from core.clock import parse_instant
from tasks.selectors import task_get
from tests.a2a import clients
from tests.factories import contribution_payload, open_task_payload, open_task_request

_ids = itertools.count(1)


@pytest.fixture(params=["asgi", "wsgi"])
def live_url(request, transactional_db, settings) -> str:
    """The A2A door has two adapters: its own ASGI app (what uvicorn serves) and the Django view
    (what a WSGI server serves). Every A2A test runs against both."""
    server = request.getfixturevalue(f"_cairn_{'wsgi_' if request.param == 'wsgi' else ''}server")
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "127.0.0.1", "localhost"]
    return f"http://127.0.0.1:{server.port}"


Rpc = Callable[..., httpx.Response]


@pytest.fixture
def rpc(http: httpx.Client) -> Rpc:
    """POST one JSON-RPC request to /api/a2a as a careful client would (A2A-Version: 1.0)."""

    def call(
        method: str,
        params: Any = None,
        *,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        version: str | None = "1.0",
    ) -> httpx.Response:
        sent = {"Content-Type": "application/json"}
        if version is not None:
            sent["A2A-Version"] = version
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        sent.update(headers or {})
        envelope = {
            "jsonrpc": "2.0",
            "id": next(_ids),
            "method": method,
            "params": params if params is not None else {},
        }
        return http.post("/api/a2a", json=envelope, headers=sent)

    return call


def result_of(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    body = response.json()
    assert "error" not in body, body
    return body["result"]


def error_of(response: httpx.Response, code: int, status: int = 200) -> dict[str, Any]:
    """Assert a JSON-RPC error with this code; returns the error object."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body.get("jsonrpc") == "2.0" and "result" not in body, body
    assert body["error"]["code"] == code, body
    return body["error"]


def assert_unauthorized(response):
    """HTTP+JSON's 401 on JSON-RPC too: a google.rpc.Status, not a JSON-RPC error object, which
    the JS client would read by its code before the status (SPEC §8.2)."""
    assert response.status_code == 401, response.text
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="cairn"'
    body = response.json()
    assert "jsonrpc" not in body and "id" not in body
    assert body["error"]["code"] == 401 and body["error"]["status"] == "UNAUTHENTICATED"
    assert "Bearer token" in body["error"]["message"]


def message(
    payload: Any, *, task_id: str | None = None, message_id: str | None = None, **fields: Any
) -> dict:
    """A SendMessage `message` in protobuf JSON, as a client puts it on the wire."""
    sent = {
        "messageId": message_id or str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"data": payload}],
    }
    if task_id is not None:
        sent["taskId"] = task_id
    sent.update(fields)
    return sent


def refusal_of(
    result: dict[str, Any], code: str, *, task_id: str | None = None, sent_id: str | None = None
) -> dict:
    """Assert a SPEC §6 refusal Message with this code; returns its `error` object."""
    assert set(result) == {"message"}, result
    answer = result["message"]
    assert answer["role"] == "ROLE_AGENT"
    assert uuid.UUID(answer["messageId"]) and answer["messageId"] != sent_id
    assert answer["metadata"] == {"cairn": {"accepted": False}}
    if task_id is None:
        assert "taskId" not in answer and "contextId" not in answer
    else:
        assert answer["taskId"] == answer["contextId"] == task_id
    assert len(answer["parts"]) == 1 and set(answer["parts"][0]) == {"data"}
    error = answer["parts"][0]["data"]["error"]
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and isinstance(error["issues"], list)
    return error


def as_json(value: Any) -> Any:
    """A value read back from protobuf JSON, where every number is a double: integral ones as ints."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: as_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_json(item) for item in value]
    return value


@pytest.fixture
def evaluated_id(make_agent, post_task, contribute) -> str:
    """A task posted two hours ago with two agreeing reports, past its deadline, evaluated."""
    with time_machine.travel(timezone.now() - timedelta(hours=2), tick=False):
        task = post_task(make_agent())
        for _ in range(2):
            contribute(make_agent(), task)
    return str(task_get(task.pk).pk)


def wait_past(deadline: str) -> None:
    """Sleep until just after a deadline written as SPEC time."""
    remaining = (parse_instant(deadline) - datetime.now(UTC)).total_seconds()
    time.sleep(max(0.0, remaining) + 0.05)


# The official Python SDK client -------------------------------------------------------------------


@asynccontextmanager
async def sdk_client(live_url: str, token: str | None = None) -> AsyncIterator[Client]:
    """An a2a-sdk client made from the card the live server publishes; the token rides on httpx."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=20) as http_client:
        client = await ClientFactory(ClientConfig(httpx_client=http_client)).create_from_url(
            live_url
        )
        async with client:
            yield client


async def sdk_send(
    client: Client,
    payload: Any,
    *,
    task_id: str | None = None,
    message_id: str | None = None,
    metadata: dict | None = None,
) -> Task | Message:
    """SendMessage through the SDK client; returns the one Task or Message it answers with."""
    sent = Message(
        message_id=message_id or str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=[new_data_part(payload)],
    )
    if task_id:
        sent.task_id = task_id
    if metadata:
        sent.metadata.update(metadata)
    answers = [event async for event in client.send_message(SendMessageRequest(message=sent))]
    assert len(answers) == 1
    kind = answers[0].WhichOneof("payload")
    assert kind in ("task", "message"), answers[0]
    return getattr(answers[0], kind)


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


# The official JS client (@a2a-js/sdk) -------------------------------------------------------------

JS_DIR = clients.JS_DIRS[0]


def npm_installed(folder: Path) -> None:
    """The JS client of `folder`, installed; the test is skipped when it cannot be had."""
    try:
        clients.npm_installed(folder)
    except clients.Unavailable as unavailable:
        pytest.skip(str(unavailable))


@pytest.fixture(scope="module")
def node() -> str:
    """Node.js with @a2a-js/sdk 1.3.0 installed in tests/a2a/js."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    npm_installed(JS_DIR)
    return node


def agent_flow(base: str, poster: Any, contributors: list[Any], reports: list[dict]) -> dict:
    """What the JS clients' agent flows read on stdin: a post, a contribution of each report by
    each contributor in turn, and a post the rules refuse."""
    return {
        "base": base,
        "posterToken": poster.token,
        "contributorTokens": [agent.token for agent in contributors],
        "post": open_task_payload(),
        "contributions": [contribution_payload(report) for report in reports],
        "refused": open_task_payload(
            open_task_request(sources=["https://example.com/not-allowed"])
        ),
    }


def run_node(node: str, folder: Path, script: str, flow: dict[str, Any]) -> dict[str, Any]:
    """Run a client script with `flow` on stdin; returns what it wrote on stdout."""
    ran = subprocess.run(
        [node, script],
        check=False,
        cwd=folder,
        input=json.dumps(flow).encode(),
        capture_output=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr.decode()
    return json.loads(ran.stdout)
