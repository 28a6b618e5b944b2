"""SPEC §4.3 and §16 in the deployment's shape: two uvicorn processes and two `qcluster`s, each its
own OS process, on one PostgreSQL, with the ORM broker and with Redis. Nobody reads the tasks, so
only the workers can evaluate them; the tests then kill the workers and restart the database.

Every figure a test measures is printed (run with -s to see them) and named in its failure.
"""

from __future__ import annotations

import itertools
import os
import signal
import statistics
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx

from tests.deploy.processes import Deployment, database_sockets, shared_connections
from tests.factories import contribution_payload, deadline_in, open_task_payload, open_task_request

PROMISED_LAG_S = (
    60  # SPEC §4.3: evaluated within a minute of the deadline (§16: or of the database's return)
)


def _register(url: str) -> dict[str, str]:
    response = httpx.post(f"{url}/api/agent/register", json={}, timeout=10)
    assert response.status_code == 201, response.text
    return {"Authorization": f"Bearer {response.json()['token']}"}


def _post_task(url: str, agent: dict[str, str], title: str, seconds: float) -> str:
    payload = open_task_payload(open_task_request(title=title, deadline=deadline_in(seconds)))
    headers = agent | {"Idempotency-Key": str(uuid.uuid4())}
    response = httpx.post(f"{url}/api/a2a-tasks", json=payload, headers=headers, timeout=10)
    assert response.status_code == 201, response.text
    return response.json()["task"]["id"]


def _post_tasks(deployment: Deployment, count: int, first_s: float, last_s: float) -> list[str]:
    poster = _register(deployment.web_urls[0])
    urls = itertools.cycle(deployment.web_urls)
    step = (last_s - first_s) / max(1, count - 1)
    return [
        _post_task(
            next(urls), poster, f"Deployment task {n} {uuid.uuid4().hex[:8]}", first_s + n * step
        )
        for n in range(count)
    ]


def _wait_evaluated(db_rows, ids: list[str], timeout: float) -> list[tuple]:
    """(id, deadline, evaluated_at) of each task, once none is open or the time is up."""
    give_up = time.monotonic() + timeout
    while True:
        rows = db_rows(
            "SELECT id::text, deadline, evaluated_at FROM tasks_task WHERE id::text = ANY(%s)", ids
        )
        if all(row[2] is not None for row in rows) or time.monotonic() > give_up:
            return rows
        time.sleep(0.5)


def _lag_figures(lags: list[float]) -> str:
    ordered = sorted(lags)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"lag max {ordered[-1]:.1f} s, p99 {p99:.1f} s, median {statistics.median(ordered):.1f} s"
    )


def _assert_counts_exact(db_rows) -> None:
    rows = dict(db_rows("SELECT status, count(*) FROM tasks_task GROUP BY status"))
    counts = {
        status: count
        for status, count in db_rows("SELECT status, count FROM tasks_taskcount")
        if count
    }
    assert counts == rows, f"per-status counts {counts} differ from the rows {rows}"


def _assert_caught_up(
    deployment: Deployment, db_rows, ids: list[str], since: datetime, what: str
) -> None:
    """Every task evaluated within a minute of its deadline or of `since` (a worker's restart, the
    database's return), whichever came later; the counts still exact."""
    rows = _wait_evaluated(db_rows, ids, timeout=PROMISED_LAG_S + 30)
    late = [(row[2] - max(row[1], since)).total_seconds() for row in rows if row[2] is not None]
    print(f"\n[{deployment.broker}] {what}: {_lag_figures(late) if late else 'none evaluated'}")
    assert len(late) == len(ids), (
        f"{len(ids) - len(late)} of {len(ids)} tasks still open\n{deployment.tails()}"
    )
    assert max(late) <= PROMISED_LAG_S, f"evaluated late: {_lag_figures(late)}"
    _assert_counts_exact(db_rows)


def _assert_no_shared_connections(deployment: Deployment, *, within_s: float = 20) -> None:
    """No database socket is held by two processes, looked at until at least three processes hold
    one at once: a worker between jobs may have given its connection back."""
    deadline = time.monotonic() + within_s
    while True:
        processes = [process for service in deployment.services for process in service.tree()]
        held = database_sockets(processes, deployment.postgres.port)
        shared = shared_connections(held)
        assert not shared, f"database connections shared between processes (inode: pids): {shared}"
        if len([pid for pid, inodes in held.items() if inodes]) >= 3:
            return
        assert time.monotonic() < deadline, (
            f"too few processes hold database connections to judge: {held}"
        )
        time.sleep(0.2)


def _ensure_workers(deployment: Deployment, count: int) -> None:
    while len(deployment.workers()) < count:
        deployment.start_worker()


def test_tasks_nobody_reads_are_evaluated_once_within_a_minute(deployment, db_rows):
    _ensure_workers(deployment, 2)
    ids = _post_tasks(deployment, 30, first_s=15, last_s=25)
    contributors = [_register(deployment.web_urls[1]) for _ in range(2)]
    for task_id in ids[:10]:
        for agent in contributors:
            response = httpx.post(
                f"{deployment.web_urls[1]}/api/a2a-tasks/{task_id}/contributions",
                json=contribution_payload(),
                headers=agent,
                timeout=10,
            )
            assert response.status_code == 201, response.text

    # A process of the cluster that dies is replaced by a fork of its sentinel, which must not
    # inherit the sentinel's connection.
    (pusher,) = deployment.workers()[0].announced_pids("pushing tasks", 1)
    os.kill(pusher, signal.SIGKILL)

    rows = _wait_evaluated(db_rows, ids, timeout=25 + PROMISED_LAG_S + 30)
    still_open = [row[0] for row in rows if row[2] is None]
    lags = [(row[2] - row[1]).total_seconds() for row in rows if row[2] is not None]
    print(f"\n[{deployment.broker}] 30 unread tasks: {_lag_figures(lags)}")
    assert not still_open, (
        f"{len(still_open)} of 30 tasks still open well past their deadlines\n{deployment.tails()}"
    )
    assert max(lags) <= PROMISED_LAG_S, f"evaluated late: {_lag_figures(lags)}"

    first = {row[0]: row[2] for row in rows}
    time.sleep(3)
    again = {row[0]: row[2] for row in _wait_evaluated(db_rows, ids, timeout=0)}
    assert first == again, "an evaluation changed after it was made"
    outcomes = dict(
        db_rows(
            "SELECT outcome, count(*) FROM tasks_task WHERE id::text = ANY(%s) GROUP BY outcome",
            ids,
        )
    )
    assert outcomes == {"resolved": 10, "unresolved": 20}
    _assert_counts_exact(db_rows)
    _assert_no_shared_connections(deployment)


def test_a_cluster_whose_idle_workers_were_killed_keeps_evaluating(deployment, db_rows):
    """An idle worker holds the read lock of its cluster's in-memory task queue; killing it there
    must not leave the cluster's other and new workers waiting on that lock forever."""
    for worker in deployment.workers():
        worker.terminate(timeout=15)
    cluster = deployment.start_worker()
    for pid in cluster.announced_pids("ready for work", 2):
        os.kill(pid, signal.SIGKILL)
    time.sleep(2)
    ids = _post_tasks(deployment, 6, first_s=5, last_s=8)

    rows = _wait_evaluated(db_rows, ids, timeout=8 + PROMISED_LAG_S + 30)
    lags = [(row[2] - row[1]).total_seconds() for row in rows if row[2] is not None]
    print(
        f"\n[{deployment.broker}] one qcluster, its idle workers killed: {_lag_figures(lags) if lags else 'none evaluated'}"
    )
    assert len(lags) == len(ids), (
        f"{len(ids) - len(lags)} of {len(ids)} tasks still open\n{cluster.tail()}"
    )
    assert max(lags) <= PROMISED_LAG_S, f"evaluated late: {_lag_figures(lags)}"


def test_killed_workers_catch_up_within_a_minute_of_a_restart(deployment, db_rows):
    _ensure_workers(deployment, 2)
    started = time.monotonic()
    ids = _post_tasks(deployment, 20, first_s=20, last_s=24)
    posted = time.monotonic()
    # Each deadline counts from its own post: the workers die before the first, however long the
    # posts took on a busy machine, and stay dead until the last has passed.
    time.sleep(max(0.0, started + 6 - posted))
    killed_at = datetime.now(UTC)
    for worker in deployment.workers():
        worker.kill_all()
    time.sleep(max(0.0, posted + 26 - time.monotonic()))
    rows = _wait_evaluated(db_rows, ids, timeout=0)
    early = [row for row in rows if row[2] is not None]
    assert not early, f"evaluated with no worker running, killed at {killed_at}: {early}"

    restarted_at = datetime.now(UTC)
    deployment.start_worker()
    _assert_caught_up(
        deployment, db_rows, ids, restarted_at, "after SIGKILL of every qcluster, one restarted"
    )
    _assert_no_shared_connections(deployment)


def test_a_qcluster_stops_within_ten_seconds_of_sigterm(deployment):
    _ensure_workers(deployment, 1)
    worker = deployment.workers()[0]
    time.sleep(3)  # past start-up, guarding its workers
    seconds = worker.terminate(timeout=30)
    print(f"\n[{deployment.broker}] qcluster stopped {seconds:.1f} s after SIGTERM")
    assert seconds <= 10, f"qcluster took {seconds:.1f} s to stop\n{worker.tail()}"


def test_a_worker_started_while_the_database_is_down_waits_for_it(deployment, db_rows):
    """An operator who restarts everything at once, or a supervisor that replaces a worker in an
    outage: the worker must wait for the database, not exit, and still stop on SIGTERM."""
    for worker in deployment.workers():
        worker.terminate(timeout=15)
    ids = _post_tasks(deployment, 4, first_s=4, last_s=6)
    deployment.postgres.stop()
    try:
        waiting, stopped = deployment.start_worker(), deployment.start_worker()
        time.sleep(10)
        exited = [w.tail() for w in (waiting, stopped) if w.process.poll() is not None]
        assert not exited, "a worker exited while the database was down\n" + "\n".join(exited)
        seconds = stopped.terminate(timeout=30)
    finally:
        deployment.postgres.start()
    back = datetime.now(UTC)
    print(
        f"\n[{deployment.broker}] a worker waiting for the database stopped {seconds:.1f} s after SIGTERM"
    )
    assert seconds <= 10, f"qcluster took {seconds:.1f} s to stop\n{stopped.tail()}"

    _assert_caught_up(deployment, db_rows, ids, back, "due in the outage, one worker waiting")


@dataclass
class Attempt:
    door: str
    started: float
    ended: float
    status: int
    json_body: object
    retry_after: str | None
    operation_id: str | None = None

    @property
    def seconds(self) -> float:
        return self.ended - self.started

    @property
    def unavailable(self) -> bool:
        """The answer SPEC §16 gives while the database is down, on the door that gave it."""
        if self.door == "a2a":
            error = self.json_body.get("error") if isinstance(self.json_body, dict) else None
            return (
                self.status == 200
                and bool(error)
                and error["code"] == -32603
                and "unavailable" in error["message"]
            )
        error = self.json_body.get("error") if isinstance(self.json_body, dict) else None
        return (
            self.status == 503
            and bool(error)
            and error["code"] == "unavailable"
            and self.retry_after is not None
        )

    @property
    def succeeded(self) -> bool:
        if self.door == "a2a":
            return (
                self.status == 200
                and isinstance(self.json_body, dict)
                and "result" in self.json_body
            )
        return self.status in (200, 201)


class Load:
    """A bounded client load: each thread posts tasks (retrying each with its own Idempotency-Key
    until it gets a definitive answer) and reads one through HTTP and A2A, until told to stop."""

    def __init__(
        self, deployment: Deployment, agent: dict[str, str], read_id: str, threads: int = 3
    ) -> None:
        self.deployment = deployment
        self.agent = agent
        self.read_id = read_id
        self.attempts: list[Attempt] = []
        self.answered: dict[str, str] = {}  # Idempotency-Key → task id, for every 201
        self.unanswered: set[str] = set()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._run, args=(n,), daemon=True) for n in range(threads)
        ]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def _send(self, client: httpx.Client, door: str, method: str, url: str, **kwargs) -> Attempt:
        started = time.monotonic()
        try:
            response = client.request(method, url, timeout=30, **kwargs)
            try:
                body = response.json()
            except ValueError:
                body = response.text
            attempt = Attempt(
                door,
                started,
                time.monotonic(),
                response.status_code,
                body,
                response.headers.get("Retry-After"),
            )
        except httpx.TransportError as exc:
            attempt = Attempt(door, started, time.monotonic(), 0, repr(exc), None)
        with self._lock:
            self.attempts.append(attempt)
        return attempt

    def _post_until_answered(self, client: httpx.Client, url: str) -> None:
        key = uuid.uuid4().hex
        payload = open_task_payload(
            open_task_request(title=f"Load task {key}", deadline=deadline_in(3600))
        )
        headers = self.agent | {"Idempotency-Key": key}
        with self._lock:
            self.unanswered.add(key)
        while not self._stop.is_set():
            attempt = self._send(
                client, "http", "POST", f"{url}/api/a2a-tasks", json=payload, headers=headers
            )
            attempt.operation_id = key
            if attempt.status == 201:
                with self._lock:
                    self.answered[key] = attempt.json_body["task"]["id"]
                    self.unanswered.discard(key)
                return
            if attempt.status not in (0, 503):
                return
            time.sleep(0.2)

    def _run(self, n: int) -> None:
        urls = itertools.cycle(
            self.deployment.web_urls[n % 2 :] + self.deployment.web_urls[: n % 2]
        )
        with httpx.Client() as client:
            while not self._stop.is_set():
                url = next(urls)
                self._post_until_answered(client, url)
                self._send(client, "http", "GET", f"{url}/api/a2a-tasks/{self.read_id}")
                self._send(
                    client,
                    "a2a",
                    "POST",
                    f"{url}/api/a2a",
                    json={
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "GetTask",
                        "params": {"id": self.read_id},
                    },
                    headers={"A2A-Version": "1.0"},
                )
                time.sleep(0.05)


def test_a_database_restart_under_load_fails_fast_recovers_and_loses_nothing(deployment, db_rows):
    _ensure_workers(deployment, 2)
    poster = _register(deployment.web_urls[0])
    read_id = _post_task(deployment.web_urls[0], poster, "A task read throughout the restart", 3600)
    due_ids = _post_tasks(deployment, 8, first_s=10, last_s=14)

    with Load(deployment, poster, read_id) as load:
        time.sleep(4)
        down_at = time.monotonic()
        deployment.postgres.stop()
        time.sleep(10)
        deployment.postgres.start()
        up_at = time.monotonic()
        up_wall = datetime.now(UTC)
        time.sleep(20)

    attempts = load.attempts
    during = [a for a in attempts if a.ended > down_at and a.started < up_at]
    failed = [a for a in during if not a.succeeded]
    slowest = max(a.seconds for a in attempts)
    successes_after = sorted(
        a.ended - up_at for a in attempts if a.started >= up_at and a.succeeded
    )
    recovered_after = successes_after[0] if successes_after else float("inf")
    late_failures = [a for a in attempts if a.started >= up_at + 10 and not a.succeeded]
    wrong = [a for a in attempts if not a.succeeded and not a.unavailable]
    print(
        f"\n[{deployment.broker}] database down {up_at - down_at:.1f} s: {len(attempts)} requests, "
        f"{len(failed)} failed during the outage, slowest answer {slowest:.2f} s, "
        f"first success {recovered_after:.2f} s after the database was back, "
        f"{len(load.answered)} writes answered"
    )
    assert during, "no request was sent while the database was down"
    assert slowest <= 5, f"a request took {slowest:.2f} s (SPEC §16: fail within 5 s)"
    assert not wrong, f"answers other than success or 'unavailable': {wrong[:5]}"
    assert recovered_after <= 10, (
        f"first success {recovered_after:.2f} s after the database returned"
    )
    assert not late_failures, (
        f"{len(late_failures)} requests failed 10 s after the database returned: {late_failures[:3]}"
    )

    titles = [f"Load task {key}" for key in load.answered]
    stored = dict(
        db_rows(
            "SELECT title, count(*) FROM tasks_task WHERE title = ANY(%s) GROUP BY title", titles
        )
    )
    assert stored == dict.fromkeys(titles, 1), "an answered write is missing or was applied twice"
    retried = [f"Load task {key}" for key in load.unanswered]
    assert all(
        n == 1
        for n in dict(
            db_rows(
                "SELECT title, count(*) FROM tasks_task WHERE title = ANY(%s) GROUP BY title",
                retried,
            )
        ).values()
    )

    _assert_caught_up(deployment, db_rows, due_ids, up_wall, "tasks due during the outage")
