"""The reference server: the official a2a-sdk 1.3.0 server, as its own docs assemble it.

Starlette routes from the SDK (`create_agent_card_routes`, `create_jsonrpc_routes` and
`create_rest_routes`, JSON-RPC and HTTP+JSON at the same base URL as Cairn's), the SDK's
`DefaultRequestHandler` and its `DatabaseTaskStore` on PostgreSQL (SQLAlchemy + asyncpg, the driver
of `a2a-sdk[postgresql]`), and a minimal `AgentExecutor` that completes every task at once.

    SDK_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/cairn_bench_sdk_1k \\
        taskset -c 0 .venv/bin/python -m uvicorn bench.sdk_server:app --port 18082 --no-access-log

Run as a module, it serves the SDK's gRPC binding instead, over the same handler and store: its
`GrpcHandler` on grpcio's asyncio server with default options, as the SDK's gRPC samples serve it,
on `SDK_GRPC_PORT`:

    SDK_DATABASE_URL=... SDK_GRPC_PORT=18084 taskset -c 0 .venv/bin/python -m bench.sdk_server

Its store is filled by `bench/seed.py sdk` with the same tasks Cairn holds (the same Task objects),
so GetTask/ListTasks answer the same bytes on both servers, over any binding.
"""

from __future__ import annotations

import asyncio
import os

import grpc
from a2a.helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import DatabaseTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, a2a_pb2_grpc
from sqlalchemy.ext.asyncio import create_async_engine
from starlette.applications import Starlette

PORT = int(os.environ.get("SDK_PORT", "18082"))
GRPC_PORT = int(os.environ.get("SDK_GRPC_PORT", "18084"))
DATABASE_URL = os.environ.get(
    "SDK_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/cairn_bench_sdk_1k"
)


class CompleteAtOnce(AgentExecutor):
    """The smallest useful agent: every message makes a task, completed straight away."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task or new_task_from_user_message(context.message)
        if context.current_task is None:
            await event_queue.enqueue_event(task)
        await TaskUpdater(event_queue, task.id, task.context_id).complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


CARD = AgentCard(
    name="SDK reference",
    description="The a2a-sdk 1.3.0 server with DatabaseTaskStore, for Cairn's benchmark.",
    version="1.3.0",
    supported_interfaces=[
        AgentInterface(
            url=f"http://127.0.0.1:{PORT}/api/a2a",
            protocol_binding="JSONRPC",
            protocol_version="1.0",
        ),
        AgentInterface(
            url=f"http://127.0.0.1:{PORT}/api/a2a",
            protocol_binding="HTTP+JSON",
            protocol_version="1.0",
        ),
    ],
    capabilities=AgentCapabilities(streaming=False, push_notifications=False),
    default_input_modes=["application/json"],
    default_output_modes=["application/json"],
    skills=[
        AgentSkill(
            id="complete",
            name="Complete",
            description="Completes every task at once.",
            tags=["bench"],
        )
    ],
)

engine = create_async_engine(
    DATABASE_URL.replace("postgresql://", "postgresql+asyncpg://", 1).replace(
        "postgres://", "postgresql+asyncpg://", 1
    ),
    pool_size=8,
)
task_store = DatabaseTaskStore(engine, create_table=True)
handler = DefaultRequestHandler(
    agent_executor=CompleteAtOnce(), task_store=task_store, agent_card=CARD
)

app = Starlette(
    routes=[
        *create_agent_card_routes(CARD),
        *create_jsonrpc_routes(handler, rpc_url="/api/a2a"),
        *create_rest_routes(handler, path_prefix="/api/a2a"),
    ]
)


async def serve_grpc() -> None:
    """The SDK's gRPC binding over the same handler, until the process is stopped."""
    server = grpc.aio.server()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), server)
    server.add_insecure_port(f"127.0.0.1:{GRPC_PORT}")
    await server.start()
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(serve_grpc())
