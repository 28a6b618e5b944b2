"""What `CAIRN_DB_POOLER=transaction` costs: nothing is prepared on any connection, and the read
pool's generic plans are gone. Serially, in one process, straight to PostgreSQL (no pooler, so
only the setting's own cost shows): the CPU time of a contribution (the domain function, Django's
connection) and of a stored GetTask read (the read pool, on the event loop), this process's and
its PostgreSQL backends' together (CPU time, not wall-clock: on a shared machine the wall-clock
moves with the neighbours' load). Run it once for each setting, alternately:

    .venv/bin/python bench/pooler_cost.py [count]
    CAIRN_DB_POOLER=transaction .venv/bin/python bench/pooler_cost.py [count]

`DATABASE_URL` names a database it migrates and fills (default: `cairn_bench_pooler` on the
machine's PostgreSQL).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("SECRET_KEY", "cairn-bench-only-secret-key")
os.environ.setdefault("DEBUG", "true")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cairn.settings")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/cairn_bench_pooler")
for limit in ("TASKS_PER_AGENT_PER_DAY", "OPEN_TASKS_PER_AGENT", "CONTRIBUTIONS_PER_AGENT_PER_DAY"):
    os.environ.setdefault(f"CAIRN_{limit}", "1000000")

import django  # noqa: E402
import psycopg  # noqa: E402

django.setup()

from a2a.types import GetTaskRequest  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from a2a_gateway import read_connections  # noqa: E402
from a2a_gateway.stored_reads import stored_task  # noqa: E402
from agents.models import Door  # noqa: E402
from agents.services import Caller, agent_register  # noqa: E402
from tasks.services import contribution_submit, task_post  # noqa: E402
from tests.factories import contribution_payload, open_task_payload, open_task_request  # noqa: E402

COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else 300
BATCHES = 3
READS = 10 * COUNT  # a read costs a tenth of a write; the kernel counts CPU in 10 ms ticks
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _backends_cpu(monitor: psycopg.Connection) -> dict[int, float]:
    """CPU seconds of each backend of this database but the monitor's own."""
    pids = monitor.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid()"
    ).fetchall()
    spent = {}
    for (pid,) in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        spent[pid] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return spent


class CpuClock:
    """CPU seconds of this process and of its database's backends, from when it was made."""

    def __init__(self, monitor: psycopg.Connection) -> None:
        self.monitor = monitor
        self.started = time.process_time()
        self.backends = _backends_cpu(monitor)

    def seconds(self) -> float:
        now = _backends_cpu(self.monitor)
        spent = sum(cpu - self.backends.get(pid, 0.0) for pid, cpu in now.items())
        return time.process_time() - self.started + spent


def _agent():
    return agent_register(label="", address=uuid.uuid4().hex)[0]


def _post(agent) -> str:
    payload = open_task_payload(open_task_request(title=f"Bench task {uuid.uuid4().hex}"))
    done = task_post(Caller(agent, str(uuid.uuid4()), Door.HTTP), payload=payload)
    return done.body["task"]["id"]


def _contribute(agent, task_id: str) -> None:
    contribution_submit(
        Caller(agent, str(uuid.uuid4()), Door.HTTP), task_id=task_id, payload=contribution_payload()
    )


async def _reads(monitor: psycopg.Connection, keys: list[uuid.UUID]) -> list[float]:
    for key in keys[:50]:  # the pool's connection, and its prepared statement where there is one
        await stored_task(GetTaskRequest(id=str(key)), read_connections.PoolSource())
    per_read = []
    for _ in range(BATCHES):
        clock = CpuClock(monitor)
        for index in range(READS):
            assert await stored_task(
                GetTaskRequest(id=str(keys[index % len(keys)])), read_connections.PoolSource()
            )
        per_read.append(clock.seconds() / READS)
    await read_connections.close()
    return per_read


def main() -> None:
    call_command("migrate", verbosity=0)
    database = settings.DATABASES["default"]
    monitor = psycopg.connect(
        dbname=database["NAME"],
        host=database["HOST"],
        port=database["PORT"],
        user=database["USER"],
        autocommit=True,
    )
    poster, contributor = _agent(), _agent()
    tasks = [_post(poster) for _ in range(COUNT * (BATCHES + 1))]
    for task_id in tasks[:COUNT]:  # warm-up: the connections, their prepared statements
        _contribute(contributor, task_id)
    per_contribution = []
    for batch in range(1, BATCHES + 1):
        clock = CpuClock(monitor)
        for task_id in tasks[batch * COUNT : (batch + 1) * COUNT]:
            _contribute(contributor, task_id)
        per_contribution.append(clock.seconds() / COUNT)
    per_read = asyncio.run(_reads(monitor, [uuid.UUID(task_id) for task_id in tasks[:COUNT]]))
    print(
        f"CAIRN_DB_POOLER={settings.CAIRN_DB_POOLER or '(unset)'}: "
        f"contribution {statistics.median(per_contribution) * 1e3:.2f} ms "
        f"({', '.join(f'{t * 1e3:.2f}' for t in per_contribution)}), "
        f"GetTask read {statistics.median(per_read) * 1e6:.0f} µs "
        f"({', '.join(f'{t * 1e6:.0f}' for t in per_read)})"
    )


if __name__ == "__main__":
    main()
