"""The monitor's first read of the whole log through its tiles (SPEC §15.5): how long
`cairn_verify.py monitor` takes over a 100,000-entry log served by a live Cairn.

    PYTHONPATH=. taskset -c 1 .venv/bin/python bench/tiles_read.py [entries]

Makes `cairn_bench_tiles` on the benchmark's PostgreSQL (`bench/run.sh pg-start`'s cluster, or
`BENCH_PG`) once per size, filled through the log's own queue and sequencer with contribution-like
entries, then serves it with Cairn under uvicorn pinned to core 0 and runs the verifier's `monitor`, the
repository's own file, on it with a fresh CAIRN_HOME: it checks the checkpoint, fetches every
entry bundle, hashes every entry, folds the root, and applies the log's rules to every entry.
The entries are open tasks, each a task entry and three contribution entries.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
import uuid

import psycopg

from bench import (  # bench/bench.py, beside this file
    CAIRN_PORT,
    PY,
    cairn_env,
    cairn_server,
    db_exists,
    log,
    pg_start,
    pg_url,
    recreate_db,
    run,
)

DB = "cairn_bench_tiles"


def checkpointed_size() -> int:
    with psycopg.connect(pg_url(DB)) as conn:
        row = conn.execute("SELECT max(tree_size) FROM ledger_checkpoint").fetchone()
    return row[0] or 0


def fill(entries: int) -> None:
    """A fresh database whose log holds `entries` entries under a signed checkpoint, written the
    way the writes and the sequencer write them."""
    recreate_db(DB)
    env = cairn_env(pg_url(DB))
    run([PY, "manage.py", "migrate", "--noinput", "-v0"], env=env)
    os.environ.update(env)
    import django

    django.setup()
    from django.db import transaction

    from ledger.services import log_queue, log_sequence

    started = time.perf_counter()
    for first in range(0, entries, 10_000):
        with transaction.atomic():
            log_queue(open_task_entries(n) for n in range(first, min(entries, first + 10_000)))
    queued = time.perf_counter()
    log_sequence()
    log(
        f"queued {entries:,} entries in {queued - started:.1f} s, "
        f"sequenced them in {time.perf_counter() - queued:.1f} s"
    )


def open_task_entries(n: int) -> dict:
    """Entry `n` of a log of open tasks: every fourth a task entry, then its three contributions."""
    task_id = str(uuid.UUID(int=n // 4))
    if n % 4 == 0:
        return {
            "type": "cairn.log/task",
            "task_id": task_id,
            "public_input_digest": "sha256:" + hashlib.sha256(b"%d" % n).hexdigest(),
            "deadline": "2026-12-31T00:00:00.000Z",
            "created_at": "2026-12-03T09:00:00.000Z",
        }
    return {
        "type": "cairn.log/contribution",
        "task_id": task_id,
        "contribution_id": str(uuid.UUID(int=2**64 + n)),
        "commitment": "sha256:" + hashlib.sha256(b"%d" % n).hexdigest(),
        "received_at": "2026-12-03T10:00:00.000Z",
    }


def monitor(base_url: str, home: str) -> None:
    done = subprocess.run(
        [PY, "verify/cairn_verify.py", "--url", base_url, "monitor"],
        env={**os.environ, "CAIRN_HOME": home},
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"the monitor did not verify the log:\n{done.stdout[-3000:]}")


def main() -> None:
    entries = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    pg_start()
    if not db_exists(DB) or checkpointed_size() != entries:
        fill(entries)
    with (
        cairn_server("uvicorn", pg_url(DB), "cairn.settings"),
        tempfile.TemporaryDirectory() as home,
    ):
        started = time.perf_counter()
        monitor(f"http://127.0.0.1:{CAIRN_PORT}", home)
        seconds = time.perf_counter() - started
    log(
        f"the monitor read {entries:,} entries, rebuilt the signed root and checked the log's "
        f"rules in {seconds:.2f} s ({entries / seconds:,.0f} entries/s)"
    )


if __name__ == "__main__":
    main()
