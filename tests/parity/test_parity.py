"""One table of questions, asked through every door that offers the operation, with one answer.

The doors are A2A in each of its bindings (raw JSON-RPC 1.0, HTTP+JSON, JSON-RPC 0.3 and gRPC,
the last through the SDK's generated stub to `python -m cairn.grpc`: SPEC §8.6's and §8.7's
transport equivalence), the HTTP routes, the hosted MCP endpoint (official MCP client
over streamable HTTP), the local `cairn_mcp.py` (official MCP client over stdio) and the web pages'
data. Each door translates the question into its own wire form and its answer back into the
neutral shape: the public view (SPEC §3.2), a page of views, a write's view and receipt, or a §6
error code. A row is one question; adding a row asks it of every door, and a door that cannot
express the question says so (`NOT_OFFERED`) instead of answering.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any
from uuid import uuid4

import anyio
import grpc
import httpx
import time_machine
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SendMessageRequest,
    SendMessageResponse,
    TaskState,
    a2a_pb2_grpc,
)
from a2a.utils.grpc_status import status_from_call
from django.test import Client as WebClient
from django.utils import timezone
from google.protobuf.json_format import MessageToDict, ParseDict
from google.rpc import error_details_pb2
from mcp import Client as McpClient

from agents.models import AuditEntry, Operation
from core.canonical import canonical_digest
from tasks.models import Contribution
from tasks.models import Task as TaskRow
from tasks.selectors import task_get
from tests.a2a.conftest import as_json
from tests.factories import (
    contribution_payload,
    contribution_report,
    deadline_in,
    open_task_payload,
    open_task_request,
)
from tests.mcp.conftest import call, connected, db
from tests.parity.conftest import PARITY_SETTINGS
from web.pages import PAGE_SIZE as WEB_PAGE_SIZE

NOT_OFFERED = object()
VIEW_FIELDS = (
    "id", "title", "question", "sources", "acceptance_criteria", "deadline", "min_independent",
    "max_contributors", "budget", "public_input_digest", "created_at", "state",
    "contributions_received", "outcome", "verdict", "evaluated_at", "evaluation",
)  # fmt: skip
# What differs between two writes of the same payload: the new object's ids and times.
PER_WRITE = ("id", "created_at")
RECEIPT_STABLE = ("report_digest", "sealed_until")
A2A_CODES = {
    -32001: "not_found",
    -32002: "not_cancelable",  # A2A's TaskNotCancelableError: §6 has no word for it
    -32004: "task_closed",
    -32602: "invalid_query",
}
# The same errors in the HTTP+JSON binding's words (A2A 1.0 §11.6: ErrorInfo's reason).
A2A_REST_REASONS = {
    "TASK_NOT_FOUND": "not_found",
    "TASK_NOT_CANCELABLE": "not_cancelable",
    "UNSUPPORTED_OPERATION": "task_closed",
    "INVALID_PARAMS": "invalid_query",
}
# The gRPC binding's status code for each of those reasons (A2A 1.0's mapping table), so an error
# with the right reason under the wrong status is a different answer.
A2A_GRPC_STATUSES = {
    "TASK_NOT_FOUND": grpc.StatusCode.NOT_FOUND,
    "TASK_NOT_CANCELABLE": grpc.StatusCode.FAILED_PRECONDITION,
    "UNSUPPORTED_OPERATION": grpc.StatusCode.FAILED_PRECONDITION,
    "INVALID_PARAMS": grpc.StatusCode.INVALID_ARGUMENT,
}
WEB_CODES = {400: "invalid_query", 404: "not_found"}
_operations = itertools.count(1)


@dataclass(frozen=True)
class Ask:
    """One question in neutral terms; each door puts it into its own wire form."""

    token: str | None = None
    task_id: str | None = None
    payload: dict[str, Any] | None = None
    operation_id: str = field(default_factory=lambda: f"parity-{next(_operations)}")
    other_payload: dict[str, Any] | None = None  # the second write of an idempotency conflict
    filter: str = "open"  # open | completed | failed | evaluated | all (or anything, for errors)
    size: int = WEB_PAGE_SIZE
    page_token: str = ""


@dataclass(frozen=True)
class Row:
    """A question. A row named `refuse …: <code>` must be answered with that §6 code."""

    name: str
    # read | list | page | post | contribute | post_twice | contribute_twice | conflict | cancel
    operation: str
    prepare: Callable[[World], Ask]
    per_door: bool = False  # writes: each door asks about its own fresh state


# --- the world, built through the services -------------------------------------------------------


@dataclass
class World:
    make_agent: Callable[..., Any]
    post_task: Callable[..., Any]
    contribute: Callable[..., Any]
    # One deadline per row, so the tasks each door writes or reads have the same request.
    deadline: str = field(default_factory=lambda: deadline_in(3600))

    def request(self, **changes: Any) -> dict[str, Any]:
        return open_task_request(**{"deadline": self.deadline, **changes})

    def token(self) -> str:
        return self.make_agent().token

    def open_task(self, contributions: int = 0, poster: Any = None) -> str:
        task = self.post_task(poster or self.make_agent(), open_task_payload(self.request()))
        for _ in range(contributions):
            self.contribute(self.make_agent(), task)
        return str(task.pk)

    def past_task(self, verdicts: list[str], poster: Any = None) -> str:
        """A task posted two hours ago whose deadline passed an hour ago, evaluated now."""
        with time_machine.travel(timezone.now() - timedelta(hours=2), tick=False):
            task = self.post_task(poster or self.make_agent())
            for verdict in verdicts:
                self.contribute(
                    self.make_agent(),
                    task,
                    contribution_payload(contribution_report(verdict=verdict)),
                )
        return str(task_get(task.pk).pk)

    def contribution_to(self, payload: dict[str, Any]) -> Ask:
        return Ask(token=self.token(), task_id=self.open_task(), payload=payload)


# --- normalising -----------------------------------------------------------------------------


def error(code: str) -> dict[str, str]:
    return {"error": code}


def settled(answer: Any) -> Any:
    """A write's answer without what every write makes anew (ids, times, the receipt's ids)."""
    if not isinstance(answer, dict) or "error" in answer:
        return answer
    out = dict(answer)
    out["task"] = {
        key: ("…" if key in PER_WRITE else value) for key, value in answer["task"].items()
    }
    if "receipt" in answer:
        out["receipt"] = {
            key: (value if key in RECEIPT_STABLE else "…")
            for key, value in answer["receipt"].items()
        }
    return out


def listing(views: list[dict[str, Any]], more: Any) -> dict[str, Any]:
    return {"tasks": views, "more": bool(more)}


def groups(by_door: dict[str, Any]) -> list[tuple[list[str], Any]]:
    """The distinct answers, each with the doors that gave it: one group when the doors agree."""
    found: list[tuple[list[str], Any]] = []
    for door, answer in by_door.items():
        for doors, seen in found:
            if seen == answer:
                doors.append(door)
                break
        else:
            found.append(([door], answer))
    return found


# --- the doors -------------------------------------------------------------------------------


class Door:
    """A door answers the operations it offers; the rest are `NOT_OFFERED`."""

    name = ""

    async def read(self, ask: Ask) -> Any:
        return NOT_OFFERED

    async def list(self, ask: Ask) -> Any:
        return NOT_OFFERED

    async def post(self, ask: Ask) -> Any:
        return NOT_OFFERED

    async def contribute(self, ask: Ask) -> Any:
        return NOT_OFFERED

    async def cancel(self, ask: Ask) -> Any:
        return NOT_OFFERED

    async def page(self, ask: Ask) -> Any:
        first = await self.list(ask)
        if first is NOT_OFFERED or "error" in first:
            return first
        second = await self.list(replace(ask, page_token=first["next"]))
        return [first["tasks"], second["tasks"], second["more"]]

    async def post_twice(self, ask: Ask) -> Any:
        return await self._twice(self.post, ask)

    async def contribute_twice(self, ask: Ask) -> Any:
        return await self._twice(self.contribute, ask)

    async def conflict(self, ask: Ask) -> Any:
        first = await self.post(ask)
        if first is NOT_OFFERED:
            return first
        return [settled(first), await self.post(replace(ask, payload=ask.other_payload))]

    @staticmethod
    async def _twice(write: Callable[[Ask], Awaitable[Any]], ask: Ask) -> Any:
        first = await write(ask)
        if first is NOT_OFFERED:
            return first
        return {"first": settled(first), "replayed": await write(ask) == first}


class A2ADoor(Door):
    """JSON-RPC to /api/a2a, as any A2A 1.0 client sends it."""

    name = "a2a"
    STATUSES = {
        "open": "TASK_STATE_WORKING",
        "completed": "TASK_STATE_COMPLETED",
        "failed": "TASK_STATE_FAILED",
        "all": None,
    }
    CANCEL = "CancelTask"

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    async def _rpc(self, method: str, params: dict[str, Any], token: str | None = None) -> Any:
        headers = {"A2A-Version": "1.0"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        envelope = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return self._result(await self.http.post("/api/a2a", json=envelope, headers=headers))

    @staticmethod
    def _result(response: httpx.Response) -> Any:
        """The call's result, or its error in §6's words: the binding's error code, and a token
        refused with HTTP 401 (SPEC §8.2: HTTP+JSON's UNAUTHENTICATED body) is `unauthorized`."""
        body = response.json()
        if response.status_code == 401 and body["error"]["status"] == "UNAUTHENTICATED":
            return error("unauthorized")
        if "error" in body:
            code = body["error"]["code"]
            return error(A2A_CODES.get(code, f"json-rpc {code}"))
        return body["result"]

    @staticmethod
    def _view(task: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        public = as_json(dict(task["metadata"]["cairn"]))
        receipt = public.pop("contribution", None)
        artifacts = task.get("artifacts", [])
        public["evaluation"] = as_json(artifacts[0]["parts"][0]["data"]) if artifacts else None
        return public, receipt

    async def read(self, ask: Ask) -> Any:
        result = await self._rpc("GetTask", {"id": ask.task_id})
        return result if "error" in result else self._view(result)[0]

    async def list(self, ask: Ask) -> Any:
        if ask.filter == "evaluated":
            return NOT_OFFERED
        params: dict[str, Any] = {"pageSize": ask.size, "includeArtifacts": True}
        status = self.STATUSES.get(ask.filter, ask.filter)
        if status:
            params["status"] = status
        if ask.page_token:
            params["pageToken"] = ask.page_token
        result = await self._rpc("ListTasks", params)
        if "error" in result:
            return result
        page = listing([self._view(task)[0] for task in result["tasks"]], result["nextPageToken"])
        return {**page, "next": result["nextPageToken"]}

    async def _send(self, ask: Ask, task_id: str | None) -> Any:
        message: dict[str, Any] = {
            "messageId": ask.operation_id,
            "role": "ROLE_USER",
            "parts": [{"data": ask.payload}],
        }
        if task_id:
            message["taskId"] = task_id
        return self._written(await self._rpc("SendMessage", {"message": message}, ask.token))

    def _written(self, result: dict[str, Any]) -> Any:
        """A SendMessage result (`{"task"}` or `{"message"}`) as a write's neutral answer."""
        if "error" in result:
            return result
        if "message" in result:
            return error(result["message"]["parts"][0]["data"]["error"]["code"])
        view, receipt = self._view(result["task"])
        return {"task": view} if receipt is None else {"task": view, "receipt": receipt}

    async def post(self, ask: Ask) -> Any:
        return await self._send(ask, None)

    async def contribute(self, ask: Ask) -> Any:
        return await self._send(ask, ask.task_id)

    async def cancel(self, ask: Ask) -> Any:
        result = await self._rpc(self.CANCEL, {"id": ask.task_id})
        return result if "error" in result else self._view(result)[0]


class A2ARestDoor(A2ADoor):
    """The A2A 1.0 HTTP+JSON binding under /api/a2a (SPEC §8.6), as any A2A 1.0 client sends it."""

    name = "a2a-http+json"

    async def _rest(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        query: dict[str, Any] | None = None,
        token: str | None = None,
    ) -> Any:
        headers = {"A2A-Version": "1.0"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        response = await self.http.request(
            method, f"/api/a2a{path}", json=body, params=query, headers=headers
        )
        answer = response.json()
        if response.status_code == 401 and answer["error"]["status"] == "UNAUTHENTICATED":
            return error("unauthorized")
        if "error" in answer:
            reason = answer["error"]["details"][0]["reason"]
            return error(A2A_REST_REASONS.get(reason, f"http+json {reason}"))
        return answer

    async def read(self, ask: Ask) -> Any:
        result = await self._rest("GET", f"/tasks/{ask.task_id}")
        return result if "error" in result else self._view(result)[0]

    async def list(self, ask: Ask) -> Any:
        if ask.filter == "evaluated":
            return NOT_OFFERED
        query: dict[str, Any] = {"pageSize": ask.size, "includeArtifacts": "true"}
        status = self.STATUSES.get(ask.filter, ask.filter)
        if status:
            query["status"] = status
        if ask.page_token:
            query["pageToken"] = ask.page_token
        result = await self._rest("GET", "/tasks", query=query)
        if "error" in result:
            return result
        page = listing([self._view(task)[0] for task in result["tasks"]], result["nextPageToken"])
        return {**page, "next": result["nextPageToken"]}

    async def _send(self, ask: Ask, task_id: str | None) -> Any:
        message: dict[str, Any] = {
            "messageId": ask.operation_id,
            "role": "ROLE_USER",
            "parts": [{"data": ask.payload}],
        }
        if task_id:
            message["taskId"] = task_id
        result = await self._rest(
            "POST", "/message:send", body={"message": message}, token=ask.token
        )
        return self._written(result)

    async def cancel(self, ask: Ask) -> Any:
        result = await self._rest("POST", f"/tasks/{ask.task_id}:cancel")
        return result if "error" in result else self._view(result)[0]


class A2AV03Door(A2ADoor):
    """A2A 0.3 JSON-RPC on /api/a2a (SPEC §8.6), as a 0.3 client sends it: no A2A-Version
    header, 0.3 messages. 0.3 has no ListTasks."""

    name = "a2a-0.3"
    CANCEL = "tasks/cancel"

    async def _rpc(self, method: str, params: dict[str, Any], token: str | None = None) -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        envelope = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return self._result(await self.http.post("/api/a2a", json=envelope, headers=headers))

    async def read(self, ask: Ask) -> Any:
        result = await self._rpc("tasks/get", {"id": ask.task_id})
        return result if "error" in result else self._view(result)[0]

    async def list(self, ask: Ask) -> Any:
        return NOT_OFFERED

    async def _send(self, ask: Ask, task_id: str | None) -> Any:
        message: dict[str, Any] = {
            "kind": "message",
            "messageId": ask.operation_id,
            "role": "user",
            "parts": [{"kind": "data", "data": ask.payload}],
        }
        if task_id:
            message["taskId"] = task_id
        result = await self._rpc("message/send", {"message": message}, ask.token)
        if "error" in result:
            return result
        if result["kind"] == "message":
            return error(result["parts"][0]["data"]["error"]["code"])
        return self._written({"task": result})


class A2AGrpcDoor(A2ADoor):
    """The A2A 1.0 gRPC binding (SPEC §8.7): the SDK's generated stub on a channel to
    `python -m cairn.grpc`, with the metadata any A2A 1.0 gRPC client sends. Requests are built
    from the same JSON the JSON-RPC door sends (the proto JSON mapping), and answers are read back
    through it, so the neutral shape comes from the same `_view` and `_written`; an error is its
    status code and ErrorInfo reason, mapped as the HTTP+JSON door maps reasons."""

    name = "a2a-grpc"

    def __init__(self, address: str) -> None:
        self.address = address

    async def __aenter__(self) -> A2AGrpcDoor:
        self.channel = grpc.aio.insecure_channel(self.address)
        self.stub = a2a_pb2_grpc.A2AServiceStub(self.channel)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.channel.close()

    async def _call(self, method: str, request: Any, token: str | None = None) -> Any:
        metadata = [("a2a-version", "1.0")]
        if token:
            metadata.append(("authorization", f"Bearer {token}"))
        try:
            return await getattr(self.stub, method)(request, metadata=metadata, timeout=30)
        except grpc.aio.AioRpcError as refused:
            if refused.code() == grpc.StatusCode.UNAUTHENTICATED:  # not an A2A error: no ErrorInfo
                return error("unauthorized")
            return error(self._code(refused))

    @staticmethod
    def _code(refused: grpc.aio.AioRpcError) -> str:
        """The §6 code of a gRPC error: its ErrorInfo reason, if the status is the one A2A 1.0
        gives that reason; anything else is named by status and reason, so it differs."""
        reasons = []
        status = status_from_call(refused)
        for detail in status.details if status else ():
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info):
                reasons.append(info.reason)
        if len(reasons) == 1 and A2A_GRPC_STATUSES.get(reasons[0]) == refused.code():
            return A2A_REST_REASONS.get(reasons[0], f"grpc {reasons[0]}")
        return f"grpc {refused.code().name} {reasons}"

    @staticmethod
    def _json(answer: Any) -> Any:
        return answer if isinstance(answer, dict) else as_json(MessageToDict(answer))

    async def read(self, ask: Ask) -> Any:
        result = self._json(await self._call("GetTask", GetTaskRequest(id=ask.task_id)))
        return result if "error" in result else self._view(result)[0]

    async def list(self, ask: Ask) -> Any:
        if ask.filter == "evaluated":
            return NOT_OFFERED
        request = ListTasksRequest(
            page_size=ask.size, include_artifacts=True, page_token=ask.page_token
        )
        if ask.filter in self.STATUSES:
            if self.STATUSES[ask.filter]:
                request.status = TaskState.Value(self.STATUSES[ask.filter])
        else:  # a status this server does not know: a number no TaskState has (open enums)
            request.status = 99
        result = await self._call("ListTasks", request)
        if isinstance(result, dict):
            return result
        page = listing(
            [self._view(self._json(task))[0] for task in result.tasks], result.next_page_token
        )
        return {**page, "next": result.next_page_token}

    async def _send(self, ask: Ask, task_id: str | None) -> Any:
        message: dict[str, Any] = {
            "messageId": ask.operation_id,
            "role": "ROLE_USER",
            "parts": [{"data": ask.payload}],
        }
        if task_id:
            message["taskId"] = task_id
        request = ParseDict({"message": message}, SendMessageRequest())
        return self._written(self._json(await self._call("SendMessage", request, ask.token)))

    async def cancel(self, ask: Ask) -> Any:
        result = self._json(await self._call("CancelTask", CancelTaskRequest(id=ask.task_id)))
        return result if "error" in result else self._view(result)[0]


class HttpDoor(Door):
    """The plain HTTP routes of SPEC §9."""

    name = "http"
    MODES = ("open", "evaluated", "all")

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    @staticmethod
    def _answer(response: httpx.Response) -> Any:
        body = response.json()
        return error(body["error"]["code"]) if "error" in body else body

    async def read(self, ask: Ask) -> Any:
        return self._answer(await self.http.get(f"/api/a2a-tasks/{ask.task_id}"))

    async def list(self, ask: Ask) -> Any:
        if ask.filter in ("completed", "failed"):
            return NOT_OFFERED
        query = {"mode": ask.filter, "limit": ask.size}
        if ask.page_token:
            query["cursor"] = ask.page_token
        answer = self._answer(await self.http.get("/api/a2a-tasks", params=query))
        if "error" in answer:
            return answer
        return {**listing(answer["tasks"], answer["next_cursor"]), "next": answer["next_cursor"]}

    async def _write(self, path: str, ask: Ask) -> Any:
        headers = {"Idempotency-Key": ask.operation_id}
        if ask.token:
            headers["Authorization"] = f"Bearer {ask.token}"
        return self._answer(await self.http.post(path, json=ask.payload, headers=headers))

    async def post(self, ask: Ask) -> Any:
        return await self._write("/api/a2a-tasks", ask)

    async def contribute(self, ask: Ask) -> Any:
        return await self._write(f"/api/a2a-tasks/{ask.task_id}/contributions", ask)


class McpDoor(Door):
    """The read tools both MCP servers share (SPEC §10): `cairn_a2a_task` and `cairn_a2a_tasks`."""

    STATUSES = ("open", "completed", "failed")

    def __init__(self, name: str, client: McpClient) -> None:
        self.name = name
        self.client = client

    async def _tool(self, tool: str, arguments: dict[str, Any]) -> Any:
        answer = await call(self.client, tool, arguments)
        return error(answer.code) if answer.is_error else answer.data

    async def read(self, ask: Ask) -> Any:
        return await self._tool("cairn_a2a_task", {"task_id": ask.task_id})

    async def list(self, ask: Ask) -> Any:
        if ask.filter in ("evaluated", "all"):
            return NOT_OFFERED
        arguments: dict[str, Any] = {"status": ask.filter, "page_size": ask.size}
        if ask.page_token:
            arguments["page_token"] = ask.page_token
        answer = await self._tool("cairn_a2a_tasks", arguments)
        if "error" in answer:
            return answer
        return {
            **listing(answer["tasks"], answer["next_page_token"]),
            "next": answer["next_page_token"],
        }


class LocalMcpDoor(McpDoor):
    """`cairn_mcp.py` over stdio: the read tools, and the writes it builds from an approved digest.

    It always writes `public_output: true` and its own scope and schema, and derives the operation
    id from what was approved, so a payload it could not have built is not a question for it; and
    it registers an agent of its own on its first write, so a write without a token is not either."""

    def __init__(self, client: McpClient, home: Path) -> None:
        super().__init__("local-mcp", client)
        self.home = home

    def _as(self, token: str | None) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "token").write_text(f"{token}\n", encoding="utf-8")

    async def post(self, ask: Ask) -> Any:
        if ask.token is None:
            return NOT_OFFERED
        payload = ask.payload or {}
        approval = payload.get("approval", {})
        if (
            set(payload) != {"schema", "request", "approval"}
            or payload["schema"] != "cairn.open_task/0.1"
            or approval.get("public_output") is not True
            or approval.get("scope") != "this_open_task"
        ):
            return NOT_OFFERED
        self._as(ask.token)
        return await self._tool(
            "cairn_a2a_create_task",
            {
                "request": payload["request"],
                "public_input_digest": approval["public_input_digest"],
            },
        )

    async def contribute(self, ask: Ask) -> Any:
        if ask.token is None:
            return NOT_OFFERED
        report = dict(ask.payload or {})
        approval = report.pop("approval", {})
        if approval.get("public_output") is not True or approval.get("scope") != (
            "this_contribution"
        ):
            return NOT_OFFERED
        self._as(ask.token)
        return await self._tool(
            "cairn_a2a_contribute",
            {
                "task_id": ask.task_id,
                "report": report,
                "public_output_digest": approval["public_output_digest"],
            },
        )

    async def conflict(self, ask: Ask) -> Any:
        return NOT_OFFERED  # its operation id is the approved digest: no two payloads share one


class WebDoor(Door):
    """The data the web pages render: the task page's and the feed's context."""

    name = "web"
    MODES = ("open", "evaluated", "all")

    def __init__(self) -> None:
        self.client = WebClient()

    @staticmethod
    def _view(display: dict[str, Any]) -> dict[str, Any]:
        return {name: display[name] for name in VIEW_FIELDS}

    def _get(self, path: str, query: dict[str, Any] | None = None) -> Any:
        """The rendered page's context, or the §6 code of the error page shown instead."""
        response = self.client.get(path, query or {})
        if response.status_code != 200:
            return error(WEB_CODES.get(response.status_code, f"http {response.status_code}"))
        return response.context

    async def read(self, ask: Ask) -> Any:
        context = await db(lambda: self._get(f"/a2a/tasks/{ask.task_id}"))()
        return context if isinstance(context, dict) else self._view(context["task"])

    async def list(self, ask: Ask) -> Any:
        if ask.filter in ("completed", "failed") or ask.size != WEB_PAGE_SIZE:
            return NOT_OFFERED
        query = {"mode": ask.filter}
        if ask.page_token:
            query["cursor"] = ask.page_token
        context = await db(lambda: self._get("/a2a", query))()
        if isinstance(context, dict):
            return context
        # The feed puts what a reader can still act on first (open tasks, closing soonest: §11);
        # the other doors order by status time (A2A §8.5). The same tasks, put in that order.
        views = sorted(
            (self._view(display) for display in context["tasks"]),
            key=lambda view: (view["evaluated_at"] or view["created_at"], view["id"]),
            reverse=True,
        )
        return {**listing(views, context["next_cursor"]), "next": context["next_cursor"]}


# --- the table -------------------------------------------------------------------------------


def _posting(
    build: Callable[[], dict[str, Any]] | None = None, **changes: Any
) -> Callable[[World], Ask]:
    """A posting by a fresh agent: the payload `build` makes, or one with these request changes.
    Payloads are built when the row is asked, so their deadlines are always ahead."""

    def prepare(world: World) -> Ask:
        payload = build() if build else open_task_payload(world.request(**changes))
        return Ask(token=world.token(), payload=payload)

    return prepare


def _contribution(payload: dict[str, Any]) -> Callable[[World], Ask]:
    return lambda world: world.contribution_to(payload)


def _own_task(world: World) -> Ask:
    poster = world.make_agent()
    return Ask(
        token=poster.token,
        task_id=world.open_task(poster=poster),
        payload=contribution_payload(),
    )


def _duplicate(world: World) -> Ask:
    agent = world.make_agent()
    task_id = world.open_task()
    world.contribute(agent, task_get(task_id))
    other = contribution_payload(contribution_report(verdict="source_unclear"))
    return Ask(token=agent.token, task_id=task_id, payload=other)


def _full(world: World) -> Ask:
    return Ask(
        token=world.token(),
        task_id=world.open_task(contributions=3),
        payload=contribution_payload(),
    )


def _contribution_cap(world: World) -> Ask:
    agent = world.make_agent()
    for _ in range(3):  # CAIRN_CONTRIBUTIONS_PER_AGENT_PER_DAY
        world.contribute(agent, task_get(world.open_task()))
    return Ask(token=agent.token, task_id=world.open_task(), payload=contribution_payload())


def _posting_cap(earlier_today: int, open_now: int) -> Callable[[World], Ask]:
    """An agent that posted `earlier_today` tasks now past their deadline and `open_now` open ones."""

    def prepare(world: World) -> Ask:
        agent = world.make_agent()
        for _ in range(earlier_today):
            world.past_task([], poster=agent)
        for _ in range(open_now):
            world.open_task(poster=agent)
        return Ask(token=agent.token, payload=open_task_payload())

    return prepare


def _closed(world: World) -> Ask:
    return Ask(token=world.token(), task_id=world.past_task([]), payload=contribution_payload())


def _paged(world: World) -> Ask:
    for _ in range(3):
        world.open_task()
    return Ask(filter="open", size=2)


def _lists_of(filter_: str) -> Row:
    def prepare(world: World) -> Ask:
        if filter_ == "open":  # the first list row: a task of each outcome, and open ones
            world.past_task(["source_supported", "source_supported"])
            world.past_task(["source_supported", "source_contradicted"])
            world.past_task([])
            world.open_task(contributions=1)
        return Ask(filter=filter_)

    return Row(f"list {filter_} tasks", "list", prepare)


UNKNOWN_ID = "00000000-0000-4000-8000-000000000000"
UNKNOWN_TOKEN = "cairn_" + "x" * 43
OUTSIDE = "https://example.com/a"

ROWS = [
    Row("read an open task", "read", lambda w: Ask(task_id=w.open_task(contributions=1))),
    Row(
        "read a resolved task",
        "read",
        lambda w: Ask(task_id=w.past_task(["source_supported", "source_supported"])),
    ),
    Row("read an unresolved task", "read", lambda w: Ask(task_id=w.past_task([]))),
    Row("read an unknown task", "read", lambda w: Ask(task_id=UNKNOWN_ID)),
    Row("read a task by a malformed id", "read", lambda w: Ask(task_id="not-a-uuid")),
    *[_lists_of(filter_) for filter_ in ("open", "completed", "failed", "evaluated", "all")],
    Row("page twice through open tasks", "page", _paged),
    Row("list with a page size over every bound", "list", lambda w: Ask(size=101)),
    Row("list with a forged page token", "list", lambda w: Ask(page_token="forged")),
    Row("list with an unknown filter", "list", lambda w: Ask(filter="pending")),
    Row("post a task", "post", _posting(), per_door=True),
    Row("contribute", "contribute", _contribution(contribution_payload()), per_door=True),
    Row("replay a posting", "post_twice", _posting(), per_door=True),
    Row(
        "replay a contribution",
        "contribute_twice",
        _contribution(contribution_payload()),
        per_door=True,
    ),
    Row(
        "refuse another posting under a used operation id: idempotency_conflict",
        "conflict",
        lambda w: replace(
            _posting()(w),
            other_payload=open_task_payload(open_task_request(title="Another title, same key")),
        ),
        per_door=True,
    ),
    # Postings the rules refuse, one per §6 code.
    Row(
        "refuse a posting: unknown_schema",
        "post",
        _posting(lambda: {**open_task_payload(), "schema": "cairn.open_task/9.9"}),
        per_door=True,
    ),
    Row("refuse a posting: invalid_payload", "post", _posting(title="too short"), per_door=True),
    Row(
        "refuse a posting: approval_required",
        "post",
        _posting(lambda: open_task_payload(public_output=False)),
        per_door=True,
    ),
    Row(
        "refuse a posting: preview_changed",
        "post",
        _posting(
            lambda: open_task_payload(public_input_digest=canonical_digest({"other": "request"}))
        ),
        per_door=True,
    ),
    Row(
        "refuse a posting: source_not_allowed",
        "post",
        _posting(sources=[OUTSIDE]),
        per_door=True,
    ),
    Row(
        "refuse a posting: deadline_out_of_range",
        "post",
        lambda w: _posting(deadline=deadline_in(60))(w),  # the deadline is made when asked
        per_door=True,
    ),
    Row(
        "refuse a posting: private_content",
        "post",
        _posting(question="Please mail the answer to someone@example.com when the source says so."),
        per_door=True,
    ),
    Row("refuse a posting: daily_cap", "post", _posting_cap(2, 1), per_door=True),
    Row("refuse a posting: open_task_cap", "post", _posting_cap(0, 2), per_door=True),
    # Contributions the rules refuse, one per §6 code, and the errors of a write.
    Row(
        "refuse a contribution: unknown_schema",
        "contribute",
        _contribution(
            contribution_payload(contribution_report(schema="cairn.task.contribution/2"))
        ),
        per_door=True,
    ),
    Row(
        "refuse a contribution: invalid_payload",
        "contribute",
        _contribution(contribution_payload(contribution_report(verdict="true"))),
        per_door=True,
    ),
    Row(
        "refuse a contribution: approval_required",
        "contribute",
        _contribution(contribution_payload(scope="everything")),
        per_door=True,
    ),
    Row(
        "refuse a contribution: preview_changed",
        "contribute",
        _contribution(
            contribution_payload(public_output_digest=canonical_digest({"another": "report"}))
        ),
        per_door=True,
    ),
    Row(
        "refuse a contribution: source_not_in_task",
        "contribute",
        _contribution(
            contribution_payload(contribution_report(source_urls=["https://github.com/elsewhere"]))
        ),
        per_door=True,
    ),
    Row(
        "refuse a contribution: private_content",
        "contribute",
        _contribution(
            contribution_payload(
                contribution_report(
                    limitations=["Read the copy at /home/alice/src/a2a-js instead of the tag"]
                )
            )
        ),
        per_door=True,
    ),
    Row("refuse a contribution: own_task", "contribute", _own_task, per_door=True),
    Row("refuse a contribution: duplicate_contribution", "contribute", _duplicate, per_door=True),
    Row("refuse a contribution: task_full", "contribute", _full, per_door=True),
    Row("refuse a contribution: daily_cap", "contribute", _contribution_cap, per_door=True),
    Row("refuse a contribution: task_closed", "contribute", _closed, per_door=True),
    Row(
        "contribute to an unknown task",
        "contribute",
        lambda w: Ask(token=w.token(), task_id=UNKNOWN_ID, payload=contribution_payload()),
        per_door=True,
    ),
    # The token, checked before the domain (SPEC §6 `unauthorized`: HTTP 401, gRPC UNAUTHENTICATED).
    Row(
        "refuse a posting without a token: unauthorized",
        "post",
        lambda w: Ask(payload=open_task_payload(w.request())),
        per_door=True,
    ),
    Row(
        "refuse a posting with an unknown token: unauthorized",
        "post",
        lambda w: Ask(token=UNKNOWN_TOKEN, payload=open_task_payload(w.request())),
        per_door=True,
    ),
    Row(
        "refuse a contribution with an unknown token: unauthorized",
        "contribute",
        lambda w: replace(w.contribution_to(contribution_payload()), token=UNKNOWN_TOKEN),
        per_door=True,
    ),
    # Cancel: A2A's own operation, and no task is cancelable (SPEC §8.2).
    Row("cancel an open task", "cancel", lambda w: Ask(task_id=w.open_task())),
    Row("cancel an unknown task", "cancel", lambda w: Ask(task_id=UNKNOWN_ID)),
]


def test_every_door_gives_one_answer_per_question(
    live_url,
    parity_grpc_server,
    make_agent,
    post_task,
    contribute,
    local_server,
    settings,
    subtests,
):
    assert len({row.name for row in ROWS}) == len(ROWS), "answers are kept by row name"
    for name, value in PARITY_SETTINGS.items():  # as the gRPC process has them
        setattr(settings, name, int(value))
    world = World(make_agent, post_task, contribute)
    local = local_server("parity")

    async def ask_every_door() -> dict[str, dict[str, Any]]:
        answers: dict[str, dict[str, Any]] = {}
        async with (
            httpx.AsyncClient(base_url=live_url, timeout=30) as http,
            McpClient(live_url + "/api/mcp") as hosted,
            connected(local) as (stdio,),
            A2AGrpcDoor(parity_grpc_server.address) as over_grpc,
        ):
            await call(stdio, "cairn_local_set_consent", {"public_output": True})
            doors: list[Door] = [
                A2ADoor(http),
                A2ARestDoor(http),
                A2AV03Door(http),
                over_grpc,
                HttpDoor(http),
                McpDoor("hosted-mcp", hosted),
                LocalMcpDoor(stdio, local.home),
                WebDoor(),
            ]
            for row in ROWS:
                world.deadline = deadline_in(3600)
                prepare = db(partial(row.prepare, world))
                shared = None if row.per_door else await prepare()
                answers[row.name] = {}
                for door in doors:
                    ask = shared or await prepare()
                    answer = await getattr(door, row.operation)(ask)
                    if answer is not NOT_OFFERED:
                        answers[row.name][door.name] = answer
        return answers

    answers = anyio.run(ask_every_door)

    for row in ROWS:
        with subtests.test(row=row.name):
            by_door = answers[row.name]
            assert len(by_door) >= 2, f"only {list(by_door)} offer this: it is no parity question"
            # §8.7: whatever A2A 1.0 asks over JSON-RPC is asked over gRPC too.
            assert ("a2a" in by_door) == ("a2a-grpc" in by_door), list(by_door)
            for door, answer in by_door.items():
                if row.operation in ("post", "contribute"):
                    by_door[door] = answer = settled(answer)
                if isinstance(answer, dict):
                    answer.pop("next", None)
            if row.name.startswith("refuse ") and ": " in row.name:
                expected = error(row.name.rsplit(": ", 1)[1])
                first = next(iter(by_door.values()))
                last = first[-1] if isinstance(first, list) else first
                assert last == expected, by_door
            assert len(groups(by_door)) == 1, groups(by_door)


# --- one write, replayed through every A2A binding ----------------------------------------------

A2A_BINDINGS = ("a2a", "a2a-http+json", "a2a-0.3", "a2a-grpc")


def _written_rows() -> tuple[int, ...]:
    return tuple(model.objects.count() for model in (TaskRow, Contribution, Operation, AuditEntry))


def test_a_write_replayed_through_another_binding_is_the_same_write(
    live_url, parity_grpc_server, make_agent, post_task, subtests
):
    """SPEC §8.6 (A2A 1.0 §3.4) and §8.7: a posting and a contribution made through one binding,
    replayed (same messageId, same agent) through each binding, gRPC among them, answer exactly
    as the first time and write nothing."""
    writes = [
        (
            binding,
            Ask(token=make_agent().token, payload=open_task_payload(), operation_id=str(uuid4())),
            Ask(
                token=make_agent().token,
                task_id=str(post_task(make_agent()).pk),
                payload=contribution_payload(),
                operation_id=str(uuid4()),
            ),
        )
        for binding in A2A_BINDINGS
    ]

    async def write_then_replay() -> list[tuple[str, Any, dict[str, Any], bool]]:
        seen = []
        async with (
            httpx.AsyncClient(base_url=live_url, timeout=30) as http,
            A2AGrpcDoor(parity_grpc_server.address) as over_grpc,
        ):
            doors = {
                door.name: door
                for door in (A2ADoor(http), A2ARestDoor(http), A2AV03Door(http), over_grpc)
            }
            assert tuple(doors) == A2A_BINDINGS
            for binding, posting, contributing in writes:
                first = [
                    await doors[binding].post(posting),
                    await doors[binding].contribute(contributing),
                ]
                rows = await db(_written_rows)()
                replays = {
                    door.name: [await door.post(posting), await door.contribute(contributing)]
                    for door in doors.values()
                }
                seen.append((binding, first, replays, rows == await db(_written_rows)()))
        return seen

    for name, first, replays, nothing_written in anyio.run(write_then_replay):
        with subtests.test(written_through=name):
            assert "error" not in first[0] and "receipt" in first[1], first
            assert replays == {door: first for door in replays}
            assert nothing_written


def test_a_write_over_grpc_or_json_rpc_is_replayed_on_the_other_proto_for_proto(
    live_url, parity_grpc_server, make_agent, post_task, subtests
):
    """SPEC §8.6/§8.7, strictly: the replay's answer is not just the same neutral view but the
    same SendMessageResponse, field for field (JSON-RPC's JSON parsed into the proto gRPC
    answers with, so no field can be dropped or retyped on either side), and it writes no row."""

    def message(payload: dict[str, Any], task: str | None = None) -> dict[str, Any]:
        sent = {"messageId": str(uuid4()), "role": "ROLE_USER", "parts": [{"data": payload}]}
        return {**sent, "taskId": task} if task else sent

    # Each write by a fresh agent (and each contribution to a fresh task), so no cap binds.
    cases = [
        (kind, first_on, make_agent().token, sent)
        for first_on in ("grpc", "json-rpc")
        for kind, sent in (
            ("posting", message(open_task_payload())),
            ("contribution", message(contribution_payload(), str(post_task(make_agent()).pk))),
        )
    ]

    async def over_grpc(stub: Any, token: str, sent: dict[str, Any]) -> SendMessageResponse:
        request = ParseDict({"message": sent}, SendMessageRequest())
        metadata = (("a2a-version", "1.0"), ("authorization", f"Bearer {token}"))
        return await stub.SendMessage(request, metadata=metadata, timeout=30)

    async def over_json_rpc(
        http: httpx.AsyncClient, token: str, sent: dict[str, Any]
    ) -> SendMessageResponse:
        envelope = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {token}"}
        body = (
            await http.post(
                "/api/a2a", json={**envelope, "params": {"message": sent}}, headers=headers
            )
        ).json()
        return ParseDict(body["result"], SendMessageResponse())

    async def both_ways() -> list[tuple[str, SendMessageResponse, SendMessageResponse, bool]]:
        seen = []
        async with (
            httpx.AsyncClient(base_url=live_url, timeout=30) as http,
            grpc.aio.insecure_channel(parity_grpc_server.address) as channel,
        ):
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            bindings = {"grpc": partial(over_grpc, stub), "json-rpc": partial(over_json_rpc, http)}
            for kind, first_on, token, sent in cases:
                (replay_on,) = set(bindings) - {first_on}
                first = await bindings[first_on](token, sent)
                rows = await db(_written_rows)()
                again = await bindings[replay_on](token, sent)
                seen.append(
                    (f"{kind} over {first_on}", first, again, rows == await db(_written_rows)())
                )
        return seen

    for label, first, again, nothing_written in anyio.run(both_ways):
        with subtests.test(written=label):
            assert first.WhichOneof("payload") == "task", first
            assert again == first
            assert nothing_written
