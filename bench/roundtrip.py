"""The cheapest correct read, timed serially: one indexed row read through a hop to the ORM's
thread (raw SQL and ORM), and the stored GetTask read the ASGI app makes on the event loop
(`a2a_gateway.read_connections`, no hop).

Any GetTask that is right across processes reads the database at least once (at least the row's
version, if a cache were to answer the rest). Run pinned to the bench PostgreSQL's core, so the
time per read is the shared core's cost of it, Python and PostgreSQL together:

    taskset -c 0 .venv/bin/python bench/roundtrip.py [database]    # default cairn_bench_pg_1k
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("SECRET_KEY", "cairn-bench-only-secret-key")
os.environ.setdefault("DEBUG", "false")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cairn.settings")
os.environ["DATABASE_URL"] = (
    os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5433")
    + "/"
    + (sys.argv[1] if len(sys.argv) > 1 else "cairn_bench_pg_1k")
)

import django  # noqa: E402

django.setup()

from a2a.types import GetTaskRequest  # noqa: E402
from asgiref.sync import sync_to_async  # noqa: E402
from django.db import connection  # noqa: E402

from a2a_gateway import read_connections  # noqa: E402
from a2a_gateway.stored_reads import stored_task  # noqa: E402
from tasks.models import Task  # noqa: E402

IDS = list(Task.objects.values_list("id", flat=True)[:200])
READS = 3000


def raw_read(i: int) -> tuple:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT status_timestamp, contributions_count FROM tasks_task WHERE id = %s",
            [IDS[i % len(IDS)]],
        )
        return cursor.fetchone()


def orm_read(i: int) -> tuple:
    return (
        Task.objects.filter(pk=IDS[i % len(IDS)])
        .values_list("status_timestamp", "contributions_count")
        .get()
    )


async def main() -> None:
    for name, read in (("raw SQL", raw_read), ("ORM", orm_read)):
        hop = sync_to_async(read)
        for i in range(200):  # warm-up: the pool's connection, prepared statements
            await hop(i)
        started = time.perf_counter()
        for i in range(READS):
            await hop(i)
        elapsed = time.perf_counter() - started
        print(f"{name}: {1000 * elapsed / READS:.3f} ms per read (hop + query)")
    for i in range(200):
        await stored_task(GetTaskRequest(id=str(IDS[i % len(IDS)])), read_connections.PoolSource())
    started = time.perf_counter()
    for i in range(READS):
        await stored_task(GetTaskRequest(id=str(IDS[i % len(IDS)])), read_connections.PoolSource())
    elapsed = time.perf_counter() - started
    print(f"stored GetTask on the event loop: {1000 * elapsed / READS:.3f} ms per read (no hop)")
    await read_connections.close()


asyncio.run(main())
