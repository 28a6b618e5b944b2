"""What the witnesses add to one sequencer pass (SPEC §15.4): the wall time of `log_sequence()`
followed by `witnesses_cosign()`, with three local witness processes (tests/ledger/spec_witness.py)
and with none, alternately, over the same database. Each pass integrates ten queued entries and
signs a checkpoint; with witnesses, each of the three cosigns it (an old size, a consistency
proof, a verified cosignature, a stored row).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cairn_bench_witness \\
        .venv/bin/python bench/witness_cost.py [passes]

The database is created and migrated if it is missing; its log only grows from run to run.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import psycopg

ROOT = Path(__file__).resolve().parents[1]
SPEC_WITNESS = ROOT / "tests" / "ledger" / "spec_witness.py"
DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/cairn_bench_witness"


def _database() -> None:
    url = os.environ.setdefault("DATABASE_URL", DEFAULT_DB)
    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def main(passes: int) -> None:
    _database()
    os.environ.setdefault("DEBUG", "true")
    os.environ.setdefault("SECRET_KEY", "bench")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cairn.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from ledger.notes import log_verifier_key
    from ledger.services import log_queue, log_sequence
    from ledger.witnesses import witnesses_cosign

    call_command("migrate", verbosity=0)
    log_key = log_verifier_key().text
    state = ROOT / "bench" / "var" / "witnesses"
    state.mkdir(parents=True, exist_ok=True)
    processes, configured = [], []
    for n in range(1, 4):
        command = [sys.executable, str(SPEC_WITNESS), "--name", f"witness.bench/w{n}"]
        command += ["--seed", os.urandom(32).hex(), "--log-key", log_key]
        command += ["--state", str(state / f"w{n}-{os.getpid()}.json")]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        port, key = process.stdout.readline().split()  # type: ignore[union-attr]
        processes.append(process)
        configured.append(
            {"name": f"witness.bench/w{n}", "key": key, "url": f"http://127.0.0.1:{port}"}
        )
    times: dict[str, list[float]] = {"none": [], "three": []}
    try:
        for i in range(passes * 2):
            label = "three" if i % 2 else "none"
            settings.CAIRN_WITNESSES = configured if label == "three" else []
            settings.CAIRN_WITNESS_QUORUM = len(settings.CAIRN_WITNESSES)
            log_queue({"type": "bench", "pass": i, "n": n} for n in range(10))
            started = time.perf_counter()
            log_sequence()
            cosigned = witnesses_cosign()
            times[label].append(time.perf_counter() - started)
            assert cosigned == (3 if label == "three" else 0), cosigned
    finally:
        for process in processes:
            process.kill()
            process.wait()
    for label, values in times.items():
        ms = [v * 1000 for v in values]
        print(
            f"{label:>5} witnesses: median {statistics.median(ms):6.1f} ms, "
            f"p90 {statistics.quantiles(ms, n=10)[-1]:6.1f} ms over {len(ms)} passes"
        )
    extra = statistics.median(times["three"]) - statistics.median(times["none"])
    print(f"three witnesses add {extra * 1000:.1f} ms to a pass (median)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50)
