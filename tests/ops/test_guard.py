"""SPEC §4.3 and §16 Faults: a `qcluster` whose workers are SIGKILLed at any instant, over and over
(idle, in a job, right after one, holding the timer lock as they hand a result in, one at a time
or all at once), replaces them, and every task that falls due meanwhile is evaluated exactly once
within a minute of its deadline, with the ORM broker and with Redis (cairn/worker.py says how).

The two brokers' clusters run side by side, each on a throwaway SQLite site of its own, each with
its own killer. Only the clusters evaluate: nothing reads the tasks through a door. The figures
are printed (run with -s to see them).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import psutil
import pytest
import redis

from tests.deploy.processes import cairn_env
from tests.workers import redis_url

ROOT = Path(__file__).resolve().parents[2]
PROMISED_S = 60  # SPEC §4.3: within a minute of the deadline, so a killed worker's replacement too
KILLS = 50  # at least, on each broker
WORKERS = 2
REDIS_URL = redis_url()
NAP_S = 0.2  # the job after which a worker is killed
# The tasks fall due from FIRST_DUE_S after they are posted, one every DUE_EVERY_S, while the
# workers are being killed: the killing goes on until the last is due and KILLS were killed.
TASKS, FIRST_DUE_S, DUE_EVERY_S = 12, 10, 3

# Reads commands on its stdin, a JSON object a line, and carries them out on the site: post a task
# due in so many seconds, or queue a job. Answers each with a line "=> <JSON>".
_SITE_SHELL = """
import json, sys, uuid
from agents.models import Door
from agents.services import Caller, agent_register
from django_q.tasks import async_task
from tasks.services import task_post
from tests.factories import deadline_in, open_task_payload, open_task_request

poster, _ = agent_register(label="poster", address="198.51.100.9")
for line in sys.stdin:
    command = json.loads(line)
    if "due_in" in command:
        request = open_task_request(deadline=deadline_in(command["due_in"]))
        caller = Caller(poster, str(uuid.uuid4()), Door.HTTP)
        posted = task_post(caller, payload=open_task_payload(request))
        answer = posted.body["task"]["id"]
    else:
        answer = async_task(command["job"], *command["args"], task_name=command["name"])
    print("=> " + json.dumps(answer), flush=True)
"""


class SiteShell:
    """`manage.py shell` on the site, kept running: posts tasks and queues jobs when asked."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        with open(log, "wb") as errors:
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "shell", "-v", "0", "-c", _SITE_SHELL],
                cwd=ROOT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
            )

    def _ask(self, command: dict) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        while line := self.process.stdout.readline():
            if line.startswith("=> "):
                return json.loads(line[3:])
        raise AssertionError(f"the site's shell ended\n{self.log.read_text()[-3000:]}")

    def post_task(self, *, due_in: float) -> str:
        """The task's id, as the database keeps it."""
        return uuid.UUID(self._ask({"due_in": due_in})).hex

    def queue(self, job: str, *args: object, name: str) -> None:
        self._ask({"job": job, "args": list(args), "name": name})

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@dataclass
class Cluster:
    """A running `manage.py qcluster` in its own session, and what its log announced, read as it
    grows: its workers' pids by process name, and which worker started which job."""

    process: subprocess.Popen
    log: Path
    read: int = 0
    rest: bytes = b""
    lines: list[str] = field(default_factory=list)
    workers: dict[str, int] = field(default_factory=dict)
    started: dict[str, str] = field(default_factory=dict)

    def follow(self) -> None:
        with open(self.log, "rb") as log:
            log.seek(self.read)
            data = log.read()
        self.read += len(data)
        *complete, self.rest = (self.rest + data).split(b"\n")
        for raw in complete:
            line = raw.decode(errors="replace")
            self.lines.append(line)
            if ready := re.search(r"(\S+) ready for work at (\d+)", line):
                self.workers[ready[1]] = int(ready[2])
            elif job := re.search(r"(\S+) processing (\S+) '", line):
                self.started[job[2]] = job[1]

    def live_workers(self) -> list[int]:
        self.follow()
        return [pid for pid in self.workers.values() if _alive(pid)]

    def worker_running(self, job: str) -> int:
        """The pid of the worker that started `job`, once one has."""

        def started() -> bool:
            self.follow()
            return job in self.started

        self.until(f"{job} started", started)
        return self.workers[self.started[job]]

    def replaced(self, killed: list[int]) -> None:
        """Wait until the killed workers are dead, then until the cluster has all its workers
        again (the rest of their generation ended and replaced with them)."""
        self.until("killed", lambda: not any(map(_alive, killed)))
        self.until("dead workers replaced", lambda: len(self.live_workers()) == WORKERS)

    def until(self, what: str, done: Callable[[], bool]) -> None:
        """Wait for `done()`; past the promised minute, fail with the log's tail."""
        give_up = time.monotonic() + PROMISED_S
        while not done():
            assert self.process.poll() is None, f"qcluster ended\n{self.tail()}"
            assert time.monotonic() < give_up, f"{what}: not within {PROMISED_S} s\n{self.tail()}"
            time.sleep(0.01)

    def tail(self, lines: int = 60) -> str:
        self.follow()
        return f"--- {self.log} ---\n" + "\n".join(self.lines[-lines:])


def _name(what: str) -> str:
    return f"{what}-{uuid.uuid4().hex[:12]}"


@dataclass
class Killer:
    """SIGKILLs the cluster's workers, each time another way; each way returns the pids killed."""

    cluster: Cluster
    shell: SiteShell
    folder: Path
    rng: random.Random
    kills: Counter = field(default_factory=Counter)

    def at_a_random_instant(self) -> list[int]:
        """One worker or all of them at once, idle or in one of the short jobs just queued."""
        for _ in range(self.rng.randint(0, 2)):
            self.shell.queue("time.sleep", self.rng.uniform(0.01, 0.3), name=_name("nap"))
        time.sleep(self.rng.uniform(0, 0.6))
        workers = self.cluster.live_workers()
        killed = self.rng.sample(workers, self.rng.choice([1, len(workers)]))
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        self.kills["at a random instant"] += len(killed)
        return killed

    def right_after_a_job(self) -> list[int]:
        """When a job of NAP_S is done, give or take a few ms: handing its result in, or back to
        waiting for the next job."""
        nap = _name("nap")
        self.shell.queue("time.sleep", NAP_S, name=nap)
        worker = self.cluster.worker_running(nap)
        time.sleep(NAP_S + self.rng.uniform(-0.01, 0.03))
        os.kill(worker, signal.SIGKILL)
        self.kills["right after a job"] += 1
        return [worker]

    def holding_the_timer_lock(self) -> list[int]:
        """The instant the timer lock is held, too short to aim at from outside: the job takes
        its worker's lock and SIGKILLs the worker."""
        died = self.folder / _name("died")
        self.shell.queue("tests.ops.faults.die_holding_the_timer_lock", str(died), name=died.name)
        worker = self.cluster.worker_running(died.name)
        self.cluster.until(f"{died.name} ran", died.exists)
        self.kills["holding the timer lock"] += 1
        return [worker]


WAYS = [
    "at_a_random_instant",
    "right_after_a_job",
    "holding_the_timer_lock",
]  # of `Killer`, in turn


@dataclass
class Evaluated:
    """What one broker's cluster did while its workers were killed."""

    broker: str
    kills: Counter
    lags: dict[str, float | None]  # each task's evaluation, in seconds after its deadline
    evaluations: Counter  # the transparency log's evaluation entries, by task
    counts: dict[str, int]  # the per-status counts Cairn keeps
    rows: dict[str, int]  # the tasks, by status
    tail: str


def _lags(database: Path, ids: list[str]) -> dict[str, float | None]:
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT id, deadline, evaluated_at FROM tasks_task").fetchall()
    lags: dict[str, float | None] = {task_id: None for task_id in ids}
    for task_id, deadline, evaluated_at in rows:
        if evaluated_at:
            lag = datetime.fromisoformat(evaluated_at) - datetime.fromisoformat(deadline)
            lags[task_id] = lag.total_seconds()
    return lags


def _evaluations(database: Path) -> Counter:
    with sqlite3.connect(database) as db:
        entries = db.execute(
            "SELECT entry FROM ledger_queuedentry UNION ALL SELECT entry FROM ledger_leaf"
        ).fetchall()
    return Counter(
        uuid.UUID(entry["task_id"]).hex
        for entry in (json.loads(text) for (text,) in entries)
        if entry["type"] == "cairn.log/evaluation"
    )


def _counts_and_rows(database: Path) -> tuple[dict[str, int], dict[str, int]]:
    with sqlite3.connect(database) as db:
        counts = dict(db.execute("SELECT status, count FROM tasks_taskcount WHERE count > 0"))
        rows = dict(db.execute("SELECT status, count(*) FROM tasks_task GROUP BY status"))
    return counts, rows


@pytest.fixture(scope="module")
def migrated(tmp_path_factory) -> Path:
    """A migrated SQLite database, copied for each broker's site."""
    folder = tmp_path_factory.mktemp("migrated")
    (folder / "cairn.env").write_text("")  # stands for the clone's `.env`, not to be read
    database = folder / "cairn.sqlite3"
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=ROOT,
        env=cairn_env(f"sqlite:///{database}", CAIRN_ENV_FILE=str(folder / "cairn.env")),
        check=True,
        capture_output=True,
    )
    return database


def _kill_and_evaluate(broker: str, migrated: Path, folder: Path) -> Evaluated:
    folder.mkdir()
    (folder / "cairn.env").write_text("")
    database = folder / "cairn.sqlite3"
    with sqlite3.connect(migrated) as source, sqlite3.connect(database) as copy:
        source.backup(copy)
    settings = {"CAIRN_ENV_FILE": str(folder / "cairn.env"), "CAIRN_WORKERS": str(WORKERS)}
    if broker == "redis":
        redis.Redis.from_url(REDIS_URL).flushdb()
        settings["CAIRN_REDIS_URL"] = REDIS_URL
    env = cairn_env(f"sqlite:///{database}", **settings)
    with open(folder / "qcluster.log", "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "qcluster"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    cluster = Cluster(process, folder / "qcluster.log")
    shell = SiteShell(env, folder / "shell.log")
    try:
        cluster.replaced([])
        ids = [shell.post_task(due_in=FIRST_DUE_S + n * DUE_EVERY_S) for n in range(TASKS)]
        last_due = time.monotonic() + FIRST_DUE_S + (TASKS - 1) * DUE_EVERY_S
        killer = Killer(cluster, shell, folder, random.Random(broker))
        turn = 0
        while sum(killer.kills.values()) < KILLS or time.monotonic() < last_due:
            cluster.replaced(getattr(killer, WAYS[turn % len(WAYS)])())
            turn += 1

        give_up = last_due + PROMISED_S + 15
        while None in _lags(database, ids).values() and time.monotonic() < give_up:
            time.sleep(0.5)
        return Evaluated(
            broker,
            killer.kills,
            _lags(database, ids),
            _evaluations(database),
            *_counts_and_rows(database),
            tail=cluster.tail(),
        )
    finally:
        shell.close()
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(timeout=10)


def test_workers_killed_at_any_instant_are_replaced_and_every_task_is_evaluated_in_time(
    migrated, tmp_path
):
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(
            pool.map(
                lambda broker: _kill_and_evaluate(broker, migrated, tmp_path / broker),
                ["orm", "redis"],
            )
        )
    for result in results:
        lags = [lag for lag in result.lags.values() if lag is not None]
        print(
            f"\n[{result.broker}] {sum(result.kills.values())} workers killed {dict(result.kills)}; "
            + (f"evaluated {min(lags):.1f} to {max(lags):.1f} s after the deadline" if lags else "")
        )
    for result in results:
        assert sum(result.kills.values()) >= KILLS, result.kills
        assert all(result.kills[way.replace("_", " ")] for way in WAYS), result.kills
        late = {task: lag for task, lag in result.lags.items() if lag is None or lag > PROMISED_S}
        assert not late, f"[{result.broker}] open or late (s): {late}\n{result.tail}"
        assert result.evaluations == Counter(dict.fromkeys(result.lags, 1)), (
            f"[{result.broker}] evaluations in the log, by task: {result.evaluations}"
        )
        assert result.counts == result.rows, (
            f"[{result.broker}] counts kept {result.counts}, tasks {result.rows}"
        )
