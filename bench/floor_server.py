"""The floor: Cairn's A2A app with every read answered from memory after its first time.

Each GetTask/ListTasks result is kept by its request (the proto's bytes), so from the second request
on the database is never touched: what remains is uvicorn, the ASGI app, the SDK's JSON-RPC
dispatcher and its protobuf-to-JSON serialisation. Whatever this serves per second, no store behind
the SDK's dispatcher can beat on this machine; dividing it by the SDK server's rate gives the highest
ratio any Cairn read could reach (bench/README.md, "The floor").

    DATABASE_URL=postgres://postgres@127.0.0.1:5433/cairn_bench_pg_1k ... \\
        taskset -c 0 .venv/bin/python -m uvicorn bench.floor_server:app --port 18083
"""

from __future__ import annotations

import os
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cairn.settings")
django.setup()

from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher  # noqa: E402

from a2a_gateway import endpoint  # noqa: E402
from a2a_gateway.asgi import endpoint as app  # noqa: E402, F401  (what uvicorn serves)
from a2a_gateway.handler import CairnRequestHandler  # noqa: E402

_answers: dict[tuple[str, bytes], Any] = {}


class MemoryReads(CairnRequestHandler):
    async def on_get_task(self, params, context):
        key = ("GetTask", params.SerializeToString())
        if key not in _answers:
            _answers[key] = await super().on_get_task(params, context)
        return _answers[key]

    async def on_list_tasks(self, params, context):
        key = ("ListTasks", params.SerializeToString())
        if key not in _answers:
            _answers[key] = await super().on_list_tasks(params, context)
        return _answers[key]


endpoint.DISPATCHER = JsonRpcDispatcher(
    MemoryReads(), context_builder=endpoint.CairnContextBuilder()
)
