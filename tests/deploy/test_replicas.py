"""SPEC §16.1's read replicas as an operator runs them: a PostgreSQL primary and a streaming replica
of its own (`pg_basebackup -R`), two web processes reading from it (`DATABASE_REPLICA_URLS`) and a
worker and `python -m cairn.grpc`. Public reads land on the replica; with its replay paused
across a deadline no door shows the task open past it, and a task posted meanwhile is found;
stopped, the replica is skipped and every read still answers; back, it takes the reads again.

The first web process takes a replica however far behind (`CAIRN_REPLICA_MAX_LAG_S` of an hour),
so it keeps reading the paused replica and what keeps its answers right is the deadline rule
alone; the second skips a replica more than the default 5 s behind. Every figure a test measures
is printed (run with -s to see them).
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import grpc
import httpx
import psycopg
import pytest
from a2a.types import GetTaskRequest, ListTasksRequest, Task, TaskState, a2a_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from core.clock import parse_instant
from tests.deploy.postgres import BIN_DIR, PrivatePostgres, free_port
from tests.deploy.processes import Deployment, Service, cairn_env, database_client_ports
from tests.deploy.test_topology import PROMISED_LAG_S
from tests.factories import deadline_in, open_task_payload, open_task_request

DATABASE = "cairn_replicas"
VERSION = {"A2A-Version": "1.0"}
# The tables every public read of a task or a page reads (the view's and the A2A door's).
READ_TABLES = ("tasks_task", "a2a_gateway_taskform")
# How long the reads go on past the deadline.
READ_PAST_DEADLINE_S = 5
# A backend reports what it read when it goes idle, holding its counts up to ten seconds.
STATS_REPORTED_S = 11


@dataclass
class Cluster:
    primary: PrivatePostgres
    replica: PrivatePostgres
    deployment: Deployment
    grpc_address: str

    @property
    def webs(self) -> list[str]:
        return self.deployment.web_urls

    def on(self, server: PrivatePostgres, sql: str, *params: Any) -> list[tuple]:
        with psycopg.connect(server.url(DATABASE), autocommit=True) as conn:
            return conn.execute(sql, params).fetchall()

    def resume_replay(self) -> None:
        """Resume the replica's replay and wait until it has replayed what the primary wrote.
        WAL held back past `max_standby_streaming_delay` lets replay cancel at once any query
        whose snapshot it conflicts with, even the catalog reads of a connection's start and
        the resuming query itself, so each step is retried until the backlog is replayed."""
        (written,) = self.on(self.primary, "SELECT pg_current_wal_lsn()")[0]
        caught_up = (
            "SELECT NOT pg_is_wal_replay_paused() AND pg_last_wal_replay_lsn() >= %s::pg_lsn"
        )
        give_up = time.monotonic() + 30
        while True:
            try:
                self.on(self.replica, "SELECT pg_wal_replay_resume()")
                if self.on(self.replica, caught_up, written) == [(True,)]:
                    return
            except psycopg.OperationalError:
                pass
            assert time.monotonic() < give_up, "the replica's replay never caught up"
            time.sleep(0.1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    if BIN_DIR is None:
        pytest.fail("PostgreSQL's server binaries (initdb, pg_basebackup, pg_ctl) are needed")
    primary = PrivatePostgres()
    primary.start()
    primary.wait_ready()
    replica = None
    deployment = None
    try:
        primary.create_database(DATABASE)
        replica = PrivatePostgres(replica_of=primary)
        replica.start()
        replica.wait_ready()
        grpc_address = f"127.0.0.1:{free_port()}"
        env = cairn_env(
            primary.url(DATABASE),
            DATABASE_REPLICA_URLS=replica.url(DATABASE),
            CAIRN_GRPC_BIND=grpc_address,
        )
        deployment = Deployment(
            broker="orm",
            postgres=primary,
            database_url=primary.url(DATABASE),
            env=env,
            logs=tmp_path_factory.mktemp("logs-replicas"),
        )
        deployment.manage("migrate", "--noinput")
        deployment.env = {**env, "CAIRN_REPLICA_MAX_LAG_S": "3600"}
        deployment.start_web()
        deployment.env = env
        deployment.start_web()
        deployment.start_worker()
        grpc_service = deployment._spawn("grpc", [sys.executable, "-m", "cairn.grpc"])
        wait_grpc_serving(grpc_address, grpc_service)
        made = Cluster(primary, replica, deployment, grpc_address)
        for url in made.webs:
            wait_replica_state(url, "serving")
        yield made
    finally:
        if deployment is not None:
            deployment.stop_all()
        for server in (replica, primary):
            if server is not None:
                try:
                    server.stop()
                except Exception:
                    pass
                server.remove()


def wait_grpc_serving(address: str, service: Service) -> None:
    give_up = time.monotonic() + 30
    while True:
        try:
            with grpc.insecure_channel(address) as channel:
                answer = health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(), timeout=2
                )
            if answer.status == health_pb2.HealthCheckResponse.SERVING:
                return
        except grpc.RpcError:
            pass
        assert time.monotonic() < give_up and service.process.poll() is None, service.tail()
        time.sleep(0.2)


# ---------------------------------------------------------------------------------------------
# Reading through every door


def _a2a_state(task: dict[str, Any]) -> str:
    return "open" if task["status"]["state"] == "TASK_STATE_WORKING" else "evaluated"


def _listed(tasks: list[dict[str, Any]], task_id: str, state: Callable[[Any], str]) -> str:
    found = [task for task in tasks if task["id"] == task_id]
    return state(found[0]) if found else "absent"


def _rpc(method: str, params: dict[str, Any]) -> Callable[[httpx.Client, str], httpx.Response]:
    def send(client: httpx.Client, url: str) -> httpx.Response:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return client.post(f"{url}/api/a2a", json=body, headers=VERSION)

    return send


def _get(path: str, headers: dict[str, str] | None = None):
    def send(client: httpx.Client, url: str) -> httpx.Response:
        return client.get(f"{url}{path}", headers=headers or {})

    return send


@dataclass(frozen=True)
class Door:
    name: str
    send: Callable[[httpx.Client, str], httpx.Response]
    state: Callable[[httpx.Response], str]  # "open", "evaluated" or "absent" (not on the page)

    def read(self, client: httpx.Client, web: str) -> tuple[int, str]:
        answer = self.send(client, web)
        return answer.status_code, self.state(answer) if answer.status_code == 200 else ""


@dataclass(frozen=True)
class GrpcDoor:
    """A read of `python -m cairn.grpc`, the one gRPC process, whichever web process is read."""

    name: str
    call: Callable[[a2a_pb2_grpc.A2AServiceStub], str]
    address: str

    def read(self, client: httpx.Client, web: str) -> tuple[int | str, str]:
        with grpc.insecure_channel(self.address) as channel:
            try:
                return 200, self.call(a2a_pb2_grpc.A2AServiceStub(channel))
            except grpc.RpcError as error:
                return f"gRPC {error.code().name}", ""


def _grpc_state(task: Task) -> str:
    return "open" if task.status.state == TaskState.TASK_STATE_WORKING else "evaluated"


def grpc_doors(task_id: str, address: str) -> list[GrpcDoor]:
    version = (("a2a-version", "1.0"),)

    def get(stub: a2a_pb2_grpc.A2AServiceStub) -> str:
        return _grpc_state(stub.GetTask(GetTaskRequest(id=task_id), metadata=version, timeout=10))

    def listed(stub: a2a_pb2_grpc.A2AServiceStub) -> str:
        page = stub.ListTasks(ListTasksRequest(page_size=50), metadata=version, timeout=10)
        found = [task for task in page.tasks if task.id == task_id]
        return _grpc_state(found[0]) if found else "absent"

    return [GrpcDoor("gRPC GetTask", get, address), GrpcDoor("gRPC ListTasks", listed, address)]


def doors(task_id: str, grpc_address: str) -> list[Door | GrpcDoor]:
    """Each public read of a task, with the state its answer shows the task in."""
    page_size = {"pageSize": 50}
    return [
        *grpc_doors(task_id, grpc_address),
        Door(
            "HTTP+JSON GetTask",
            _get(f"/api/a2a/tasks/{task_id}", VERSION),
            lambda answer: _a2a_state(answer.json()),
        ),
        Door(
            "JSON-RPC GetTask",
            _rpc("GetTask", {"id": task_id}),
            lambda answer: _a2a_state(answer.json()["result"]),
        ),
        Door(
            "HTTP route GET /api/a2a-tasks/{id}",
            _get(f"/api/a2a-tasks/{task_id}"),
            lambda answer: answer.json()["state"],
        ),
        Door(
            "task page",
            _get(f"/a2a/tasks/{task_id}"),
            lambda answer: "open" if 'class="badge badge-open"' in answer.text else "evaluated",
        ),
        Door(
            "JSON-RPC ListTasks",
            _rpc("ListTasks", page_size),
            lambda answer: _listed(answer.json()["result"]["tasks"], task_id, _a2a_state),
        ),
        Door(
            "HTTP+JSON ListTasks",
            _get("/api/a2a/tasks?pageSize=50", VERSION),
            lambda answer: _listed(answer.json()["tasks"], task_id, _a2a_state),
        ),
        Door(
            "HTTP route list GET /api/a2a-tasks",
            _get("/api/a2a-tasks?limit=50"),
            lambda answer: _listed(answer.json()["tasks"], task_id, lambda t: t["state"]),
        ),
    ]


@dataclass(frozen=True)
class Read:
    door: str
    web: str
    sent_at: datetime
    status: int | str  # HTTP's, or a gRPC error's code
    state: str


def read_everywhere(cluster: Cluster, task_id: str) -> list[Read]:
    """Every door on every web process, once each."""
    found = []
    with httpx.Client(timeout=15) as client:
        for web in cluster.webs:
            for door in doors(task_id, cluster.grpc_address):
                sent_at = datetime.now(UTC)
                status, state = door.read(client, web)
                found.append(Read(door.name, web, sent_at, status, state))
    return found


# ---------------------------------------------------------------------------------------------
# Writing, and watching the servers


def _register(url: str) -> dict[str, str]:
    response = httpx.post(f"{url}/api/agent/register", json={}, timeout=10)
    assert response.status_code == 201, response.text
    return {"Authorization": f"Bearer {response.json()['token']}"}


def post_task(cluster: Cluster, deadline_s: float) -> tuple[str, datetime]:
    request = open_task_request(title=f"Replica task {uuid.uuid4().hex[:8]}")
    request["deadline"] = deadline_in(deadline_s)
    headers = _register(cluster.webs[0]) | {"Idempotency-Key": str(uuid.uuid4())}
    answer = httpx.post(
        f"{cluster.webs[0]}/api/a2a-tasks",
        json=open_task_payload(request),
        headers=headers,
        timeout=10,
    )
    assert answer.status_code == 201, answer.text
    view = answer.json()["task"]
    return view["id"], parse_instant(view["deadline"])


def wait_replicated(cluster: Cluster, task_id: str) -> None:
    give_up = time.monotonic() + 20
    while not cluster.on(cluster.replica, "SELECT 1 FROM tasks_task WHERE id = %s", task_id):
        assert time.monotonic() < give_up, "the replica never received the task"
        time.sleep(0.1)


def _readiness(url: str) -> tuple[int, dict[str, Any]]:
    answer = httpx.get(f"{url}/readyz", timeout=10)
    return answer.status_code, answer.json()


def wait_replica_state(url: str, state: str, within_s: float = 30) -> dict[str, Any]:
    """/readyz of `url` once it says the replica is in `state`."""
    give_up = time.monotonic() + within_s
    while True:
        status, body = _readiness(url)
        replica = body["checks"]["replicas"]["replicas"]["replica1"]
        if replica["state"] == state:
            return body
        assert time.monotonic() < give_up, f"{url}/readyz never said {state}: {status} {body}"
        time.sleep(0.2)


def scans(cluster: Cluster, server: PrivatePostgres) -> int:
    """Index and sequential scans of the read tables on `server` since it started (each server
    counts the statements it ran itself: a replica its own reads)."""
    (count,) = cluster.on(
        server,
        "SELECT COALESCE(SUM(COALESCE(idx_scan, 0) + COALESCE(seq_scan, 0)), 0)::int "
        "FROM pg_stat_user_tables WHERE relname = ANY(%s)",
        list(READ_TABLES),
    )[0]
    return count


def scans_after(cluster: Cluster, server: PrivatePostgres, at_least: int) -> int:
    """`scans` once it reaches `at_least`, or after 20 s: a backend reports its counts when it
    goes idle, at most about every ten seconds."""
    give_up = time.monotonic() + 20
    while True:
        count = scans(cluster, server)
        if count >= at_least or time.monotonic() > give_up:
            return count
        time.sleep(0.5)


def burst(cluster: Cluster, task_ids: list[str], rounds: int) -> int:
    """Public reads of open tasks and pages on both web processes; how many were sent."""
    sent = 0
    for _ in range(rounds):
        for task_id in task_ids:
            for read in read_everywhere(cluster, task_id):
                assert read.status == 200, read
                sent += 1
    return sent


def assert_reads_land_on_the_replica(cluster: Cluster, task_ids: list[str]) -> None:
    replica_before = scans(cluster, cluster.replica)
    primary_before = scans(cluster, cluster.primary)
    sent = burst(cluster, task_ids, rounds=3)
    on_replica = scans_after(cluster, cluster.replica, replica_before + sent) - replica_before
    time.sleep(STATS_REPORTED_S)  # the primary's backends report too, by then
    on_primary = scans(cluster, cluster.primary) - primary_before
    print(f"\n{sent} public reads: {on_replica} scans on the replica, {on_primary} on the primary")
    assert on_replica >= sent, (
        f"{on_replica} scans on the replica, {on_primary} on the primary, for {sent} reads\n"
        + cluster.deployment.tails()
    )
    assert on_primary < sent // 4, f"{on_primary} scans on the primary for {sent} reads"


# ---------------------------------------------------------------------------------------------
# The tests


def test_public_reads_land_on_the_replica(cluster):
    task_ids = [post_task(cluster, 3600)[0] for _ in range(2)]
    for task_id in task_ids:
        wait_replicated(cluster, task_id)
    assert_reads_land_on_the_replica(cluster, task_ids)

    # Each web process holds sessions on the replica: its own reads' connections.
    activity = {
        port
        for (port,) in cluster.on(
            cluster.replica,
            "SELECT client_port FROM pg_stat_activity WHERE datname = %s AND client_port > 0",
            DATABASE,
        )
    }
    readers = [s for s in cluster.deployment.services if s.name in ("web", "grpc")]
    for web in readers:
        held = set().union(*database_client_ports(web.tree(), cluster.replica.port).values())
        assert held & activity, f"{web.name} process {web.pid} holds no session on the replica"


def test_a_paused_replica_never_shows_a_task_open_past_its_deadline(cluster):
    task_id, deadline = post_task(cluster, 8)
    wait_replicated(cluster, task_id)
    before = read_everywhere(cluster, task_id)
    assert {read.state for read in before} == {"open"}, before

    cluster.on(cluster.replica, "SELECT pg_wal_replay_pause()")
    try:
        # A task the paused replica will not have: its poster finds it all the same.
        posted_meanwhile, _ = post_task(cluster, 3600)
        unreplicated = read_everywhere(cluster, posted_meanwhile)
        reads: list[Read] = []
        while (datetime.now(UTC) - deadline).total_seconds() < READ_PAST_DEADLINE_S:
            reads += read_everywhere(cluster, task_id)

        # The replica still shows the task open, and the first web process still reads it: what
        # kept the answers right is the deadline rule, not a skipped replica.
        (still_open,) = cluster.on(
            cluster.replica, "SELECT status FROM tasks_task WHERE id = %s", task_id
        )[0]
        assert still_open == "working"
        first = wait_replica_state(cluster.webs[0], "serving")
        second = wait_replica_state(cluster.webs[1], "lagging")
        print(
            f"\nreplay paused: {len(reads)} reads across the deadline; the replica is "
            f"{first['checks']['replicas']['replicas']['replica1']['state']} to the first web "
            f"process, {second['checks']['replicas']['replicas']['replica1']['detail']} "
            "to the second"
        )
    finally:
        cluster.resume_replay()

    assert all(read.status == 200 for read in reads), [r for r in reads if r.status != 200]
    lost = [
        read
        for read in unreplicated
        if read.status != 200 or (read.state != "open" and "list" not in read.door.lower())
    ]
    assert not lost, f"a task the replica does not have yet, not found: {lost}"
    past = [read for read in reads if read.sent_at >= deadline]
    assert past, "no read was sent past the deadline"
    shown_open = [read for read in past if read.state != "evaluated"]
    assert not shown_open, f"read past the deadline, shown {shown_open}"
    (evaluated_at,) = cluster.on(
        cluster.primary, "SELECT evaluated_at FROM tasks_task WHERE id = %s", task_id
    )[0]
    assert evaluated_at is not None
    assert (evaluated_at - deadline).total_seconds() <= PROMISED_LAG_S
    wait_replica_state(cluster.webs[1], "serving")


def test_a_stopped_replica_is_skipped_and_takes_the_reads_again_when_back(cluster):
    task_ids = [post_task(cluster, 3600)[0] for _ in range(2)]
    for task_id in task_ids:
        wait_replicated(cluster, task_id)

    cluster.replica.stop()
    try:
        reads = [read for task_id in task_ids for read in read_everywhere(cluster, task_id)]
        failed = [read for read in reads if read.status != 200 or read.state != "open"]
        assert not failed, f"with the replica stopped: {failed}"
        for url in cluster.webs:
            body = wait_replica_state(url, "down")
            # Readiness is the primary's and the worker's sweep's alone.
            others = [check["ok"] for name, check in body["checks"].items() if name != "replicas"]
            assert body["checks"]["database"]["ok"], body
            assert body["status"] == ("ready" if all(others) else "unready"), body
            replica = body["checks"]["replicas"]["replicas"]["replica1"]
            assert replica["ok"] is False and "primary" in replica["detail"], replica
            print(f"\n/readyz with the replica stopped: {replica}")
            metrics = httpx.get(f"{url}/metrics", timeout=10).text
            assert 'cairn_replica_serving{replica="replica1"} 0.0' in metrics, metrics
        reads = [read for task_id in task_ids for read in read_everywhere(cluster, task_id)]
        assert all(read.status == 200 and read.state == "open" for read in reads), reads
    finally:
        cluster.replica.start()
        cluster.replica.wait_ready()

    for url in cluster.webs:
        wait_replica_state(url, "serving")
        metrics = httpx.get(f"{url}/metrics", timeout=10).text
        assert 'cairn_replica_serving{replica="replica1"} 1.0' in metrics, metrics
    time.sleep(STATS_REPORTED_S)  # the primary's counts of the reads it took meanwhile
    assert_reads_land_on_the_replica(cluster, task_ids)
