"""One read path per binding: a read refused (a task no one posted) runs one statement, whichever
binding asks, and is answered in that binding's own words. The web server (ASGI and WSGI), the
HTTP routes and a gRPC server run in this process on PostgreSQL, where every statement they send
a task's table goes through psycopg's cursor, counted here."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import psycopg
import pytest
from a2a.types import GetTaskRequest, a2a_pb2_grpc

from a2a_gateway import read_connections
from a2a_gateway.grpc_binding import A2ACalls, grpc_handler
from tests.conftest import postgres_only
from tests.grpc.conftest import VERSION

pytestmark = postgres_only("the statements are counted in psycopg's cursors")
READ_TABLES = ("tasks_task", "a2a_gateway_taskform")


@pytest.fixture
def task_statements(monkeypatch) -> list[str]:
    """Every statement this process sends that reads a task (its table or the door's), from
    whichever thread or event loop sends it."""
    sent: list[str] = []

    def noted(query: Any) -> None:
        text = query.decode() if isinstance(query, bytes) else str(query)
        if any(table in text for table in READ_TABLES):
            sent.append(text)

    execute, execute_async = psycopg.Cursor.execute, psycopg.AsyncCursor.execute

    def counted(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        noted(query)
        return execute(self, query, *args, **kwargs)

    async def counted_async(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        noted(query)
        return await execute_async(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", counted)
    monkeypatch.setattr(psycopg.AsyncCursor, "execute", counted_async)
    return sent


@pytest.fixture
def grpc_stub(transactional_db) -> Iterator[a2a_pb2_grpc.A2AServiceStub]:
    """The gRPC binding as `python -m cairn.grpc` serves it (the SDK's servicer behind the
    binding's interceptor), on an event loop of its own in this process."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def started() -> tuple[grpc.aio.Server, int]:
        servicer = grpc_handler()
        server = grpc.aio.server(interceptors=[A2ACalls(servicer)])
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        return server, port

    async def stopped(server: grpc.aio.Server) -> None:
        await server.stop(None)
        await read_connections.close()

    server, port = asyncio.run_coroutine_threadsafe(started(), loop).result(timeout=20)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield a2a_pb2_grpc.A2AServiceStub(channel)
    finally:
        asyncio.run_coroutine_threadsafe(stopped(server), loop).result(timeout=20)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)


def _rpc(http, method: str, task_id: str, headers: dict[str, str]) -> dict[str, Any]:
    envelope = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {"id": task_id}}
    answer = http.post("/api/a2a", json=envelope, headers=headers)
    assert answer.status_code == 200
    return answer.json()["error"]


def test_a_read_of_an_unknown_task_runs_one_statement_on_every_binding(
    http, grpc_stub, task_statements
):
    unknown = str(uuid.uuid4())
    a2a = {"A2A-Version": "1.0"}

    def one_statement(read: Any) -> Any:
        task_statements.clear()
        answer = read()
        assert len(task_statements) == 1, task_statements
        return answer

    error = one_statement(lambda: _rpc(http, "GetTask", unknown, a2a))
    assert error["code"] == -32001
    error = one_statement(lambda: _rpc(http, "tasks/get", unknown, {}))
    assert error["code"] == -32001
    answer = one_statement(lambda: http.get(f"/api/a2a/tasks/{unknown}", headers=a2a))
    assert answer.status_code == 404
    assert answer.json()["error"]["details"][0]["reason"] == "TASK_NOT_FOUND"
    answer = one_statement(lambda: http.get(f"/api/a2a-tasks/{unknown}"))
    assert (answer.status_code, answer.json()["error"]["code"]) == (404, "not_found")

    def grpc_read() -> grpc.RpcError:
        with pytest.raises(grpc.RpcError) as refused:
            grpc_stub.GetTask(GetTaskRequest(id=unknown), metadata=VERSION, timeout=20)
        return refused.value

    refused = one_statement(grpc_read)
    assert refused.code() == grpc.StatusCode.NOT_FOUND
