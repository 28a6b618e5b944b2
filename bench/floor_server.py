"""The floor: Cairn's A2A app with the stored forms of every read kept in memory after their first read.

Each GetTask/ListTasks is answered by the thin front (`fast_read` in `a2a_gateway.jsonrpc_binding`) as under
`cairn.asgi`, but the stored text it would read from PostgreSQL is kept by its key (the task id,
the page's query) the first time, so from the second request on the database is never touched:
what remains is uvicorn, the ASGI app, the JSON-RPC checks and the envelope. Whatever this
serves per second, no Cairn read can beat on this machine; dividing it by the SDK server's rate
gives the highest ratio a Cairn read could reach (bench/README.md, "The floor").

    DATABASE_URL=postgres://postgres@127.0.0.1:5433/cairn_bench_pg_1k ... \\
        taskset -c 0 .venv/bin/python -m uvicorn bench.floor_server:app --port 18083
"""

from __future__ import annotations

import os
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cairn.settings")
django.setup()

from a2a_gateway import read_connections  # noqa: E402
from a2a_gateway.asgi import endpoint as app  # noqa: E402, F401  (what uvicorn serves)
from a2a_gateway.read_connections import PoolSource  # noqa: E402


class MemorySource(PoolSource):
    """The pool's statements, each statement's rows kept after its first answer (keyed by its
    text and parameters but the instant, which changes on every read): the floor is what a read
    costs with no database at all."""

    kept: dict[Any, Any] = {}

    async def rows(self, alias: str, sql: str, params: dict[str, Any]) -> list[Any]:
        key = (sql, tuple(sorted((k, str(v)) for k, v in params.items() if k != "now")))
        if key not in self.kept:
            self.kept[key] = await super().rows(alias, sql, params)
        return self.kept[key]


read_connections.POOL_SOURCE = MemorySource(in_request_cycle=True)
