"""The monitor's first read of the whole log through its tiles (SPEC §15.5): how long
`cairn_verify.py monitor` takes over a 100,000- or 1,000,000-entry log served by a live Cairn,
and its peak memory.

    PYTHONPATH=. taskset -c 1 .venv/bin/python bench/tiles_read.py [entries]

Makes `cairn_bench_tiles` on the benchmark's PostgreSQL (`bench/run.sh pg-start`'s cluster, or
`BENCH_PG`) once per size, its log's rows written in bulk as the sequencer writes them (`fill`),
with contribution-like entries, then serves it with Cairn under uvicorn pinned to core 0 and runs the verifier's `monitor`, the
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
from pathlib import Path

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
    """A fresh database whose log holds `entries` entries under a signed checkpoint: the rows the
    sequencer writes (each entry's JCS text and leaf hash, the hash of every perfect subtree),
    computed with the ledger's own functions and written with COPY, then the checkpoint signed
    by `checkpoint_publish`. Going through the queue and `log_sequence` instead took 52 s for
    100,000 entries, most of it a thousand rows a transaction; the monitor checks the same rows
    either way, rebuilding the root from the entries."""
    recreate_db(DB)
    env = cairn_env(pg_url(DB))
    run([PY, "manage.py", "migrate", "--noinput", "-v0"], env=env)
    os.environ.update(env)
    import django

    django.setup()
    from core.canonical import canonical_json
    from core.clock import now_ms
    from ledger.logs import log_first
    from ledger.merkle import leaf_hash, node_hash
    from ledger.services import checkpoint_publish

    started = time.perf_counter()
    at = now_ms()
    level = []
    with psycopg.connect(pg_url(DB)) as conn, conn.cursor() as cursor:
        with cursor.copy(
            "COPY ledger_leaf (index, leaf_hash, entry, task_id, queued_at, integrated_at) "
            "FROM STDIN"
        ) as copy:
            for n in range(entries):
                entry = open_task_entries(n)
                raw = canonical_json(entry)
                level.append(leaf_hash(raw))
                copy.write_row((n, level[-1].hex(), raw.decode(), entry["task_id"], at, at))
        with cursor.copy("COPY ledger_node (level, index, hash) FROM STDIN") as copy:
            height = 0
            while level:  # each level's complete nodes, then their parents
                for index, value in enumerate(level):
                    copy.write_row((height, index, value))
                level = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
                height += 1
        conn.commit()
        conn.autocommit = True
        cursor.execute("VACUUM ANALYZE")
    checkpoint_publish(entries, log_first())
    log(f"wrote {entries:,} entries and their tree in {time.perf_counter() - started:.1f} s")


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


# Starts the monitor and prints its peak RSS (kB) last. A child's ru_maxrss on Linux keeps the
# high-water mark of the process it was forked from, through its exec: the monitor started by
# this process straight after `fill` was charged with this process's own memory.
PEAK = (
    "import os, subprocess, sys\n"
    "proc = subprocess.Popen(sys.argv[1:])\n"
    "_, status, usage = os.wait4(proc.pid, 0)\n"
    "print(f'peak_kb={usage.ru_maxrss}', flush=True)\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)


def monitor(base_url: str, home: str) -> float:
    """Run the monitor to the end; its peak resident memory in MB (its own, from wait4 in a small
    process that starts it)."""
    verifier = Path(home) / "cairn_verify.py"
    with verifier.open("w", encoding="utf-8") as built:
        subprocess.run(
            [PY, "-m", "core.amalgam", "verify/cairn_verify.py"], stdout=built, check=True
        )
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.run(
            [PY, "-c", PEAK, PY, str(verifier), "--url", base_url, "monitor"],
            env={**os.environ, "CAIRN_HOME": home},
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
        out.seek(0)
        said = out.read()
        if proc.returncode != 0:
            raise SystemExit(f"the monitor did not verify the log:\n{said[-3000:]}")
    return int(said.rsplit("peak_kb=", 1)[1]) / 1024


def main() -> None:
    entries = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    pg_start()
    if not db_exists(DB) or checkpointed_size() != entries:
        fill(entries)
    with (
        cairn_server("uvicorn", pg_url(DB), "cairn.settings"),
        tempfile.TemporaryDirectory() as home,
    ):
        load = os.getloadavg()[0]
        started = time.perf_counter()
        peak_mb = monitor(f"http://127.0.0.1:{CAIRN_PORT}", home)
        seconds = time.perf_counter() - started
    log(
        f"the monitor read {entries:,} entries, rebuilt the signed root and checked the log's "
        f"rules in {seconds:.2f} s ({entries / seconds:,.0f} entries/s), peak RSS {peak_mb:,.0f} MB"
        f" (load average {load:.1f} before)"
    )


if __name__ == "__main__":
    main()
