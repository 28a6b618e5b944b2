"""The floor: Cairn's A2A app with the stored forms of every read kept in memory after their first read.

Each GetTask/ListTasks is answered by the thin front (`a2a_gateway.fast_reads`) as under
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
import uuid
from datetime import datetime
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cairn.settings")
django.setup()

from a2a_gateway import read_pool  # noqa: E402
from a2a_gateway.asgi import endpoint as app  # noqa: E402, F401  (what uvicorn serves)
from a2a_gateway.read_model import PageQuery, StoredPage, StoredReads, StoredTask  # noqa: E402


class MemoryReads:
    """The pool's reads, each kept after its first answer."""

    def __init__(self, reads: StoredReads) -> None:
        self.reads = reads
        self.kept: dict[Any, Any] = {}

    async def task(self, key: uuid.UUID, now: datetime) -> StoredTask | None:
        if key not in self.kept:
            self.kept[key] = await self.reads.task(key, now)
        return self.kept[key]

    async def page(self, query: PageQuery, now: datetime) -> StoredPage | None:
        if query not in self.kept:
            self.kept[query] = await self.reads.page(query, now)
        return self.kept[query]


read_pool.POOL_READS = MemoryReads(read_pool.POOL_READS)  # type: ignore[assignment]
