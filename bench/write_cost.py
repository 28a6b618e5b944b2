"""What one contribution costs the shared core, measured serially: CPU seconds of this process and
of the benchmark's PostgreSQL per SendMessage, through the ASGI app's own path into the A2A door
(`a2a_gateway.jsonrpc_binding.http_reply`, as `a2a_gateway.asgi` calls it), without HTTP.

The wrk figures move by a fifth between runs minutes apart on a shared VM, the SDK server's as
much as Cairn's; CPU time per request moves far less, so a change to the write path is judged
here first, against the tree before it, alternately:

    bench/run.sh setup                                   # the write template and its request file
    taskset -c 0 .venv/bin/python bench/write_cost.py [count] [first line]
    PYTHONPATH=<checkout of the tree before> taskset -c 0 .venv/bin/python bench/write_cost.py

Each run recreates its database (`cairn_bench_write`, or `BENCH_WRITE_DB`) from the write
template, so every run meets the same tasks. On a loaded machine, run the two trees at once on
the same core, each on its own database, so both meet the same load:

    BENCH_WRITE_DB=cairn_bench_write_a PYTHONPATH=<tree before>:<tree before>/bench \
      taskset -c 0 .venv/bin/python bench/write_cost.py 1500 &
    BENCH_WRITE_DB=cairn_bench_write_b PYTHONPATH=.:bench taskset -c 0 .venv/bin/python bench/write_cost.py 1500
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import psycopg

BENCH = Path(__file__).resolve().parent
PG = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5433")
DB = os.environ.get("BENCH_WRITE_DB", "cairn_bench_write")
TEMPLATE = "cairn_bench_write_tpl"
REQUESTS = BENCH / "var" / "write_tpl" / "cairn_contributions.txt"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def recreate_database() -> None:
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB} TEMPLATE {TEMPLATE}")


def postgres_cpu_seconds(backend: int) -> float:
    """The cluster serving `backend`: its postmaster and every child of it (the backends, the WAL
    writer, the checkpointer). Not every process of the user `postgres`: on a shared machine
    another cluster's backends come and go, and one that exits takes its CPU out of the sum."""
    postmaster = _stat(backend)[1]
    total = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = _stat(int(proc.name))
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(proc.name) == postmaster or fields[1] == postmaster:
            total += fields[11] + fields[12]
    return total / CLOCK_TICKS


def _stat(pid: int) -> list[int]:
    """/proc/<pid>/stat after the command name, from the state on (ppid is [1], utime [11])."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return [0, *map(int, fields[1:])]


async def send_all(lines: list[str]) -> None:
    from a2a_gateway.jsonrpc_binding import http_reply

    for line in lines:
        token, body = line.rstrip("\n").split("\t", 1)
        headers = {
            "content-type": "application/json",
            "a2a-version": "1.0",
            "authorization": f"Bearer {token}",
            "content-length": str(len(body.encode())),
        }

        async def chunks(data: bytes = body.encode()):
            yield data

        reply = await http_reply(
            method="POST",
            path="/api/a2a",
            headers=headers,
            origin="http://127.0.0.1:18081",
            body=chunks(),
            outside_django=True,
        )
        if reply.status != 200 or b'"error"' in reply.body:
            raise SystemExit(f"refused: {reply.status} {reply.body[:300]!r}")


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    first = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    warm = 100
    lines = REQUESTS.read_text().splitlines()[first : first + warm + count]
    recreate_database()
    from bench import cairn_env  # bench/bench.py, beside this file

    os.environ.update({**cairn_env(f"{PG}/{DB}"), "PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    import django

    django.setup()
    loop = asyncio.new_event_loop()
    loop.run_until_complete(send_all(lines[:warm]))
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    python0, postgres0 = time.process_time(), postgres_cpu_seconds(backend)
    wall0 = time.perf_counter()
    loop.run_until_complete(send_all(lines[warm:]))
    python1, postgres1 = time.process_time(), postgres_cpu_seconds(backend)
    wall1 = time.perf_counter()
    per = 1e3 / count
    print(
        f"{count} contributions: Python {(python1 - python0) * per:.2f} ms, "
        f"PostgreSQL {(postgres1 - postgres0) * per:.2f} ms, wall {(wall1 - wall0) * per:.2f} ms "
        f"per contribution"
    )


if __name__ == "__main__":
    main()
