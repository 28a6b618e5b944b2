"""SPEC §16 Faults: `qcluster` stops within 10 s of SIGTERM however it is sent (once or twice, to
the process or to its whole process group, after one of its workers was killed and reincarnated)
and of SIGINT, with the ORM broker and with Redis; a job it was running is finished, not cut in
half. `make run` (web, worker and gRPC server) stops on one signal to its process group and on
Ctrl-C, leaving no process and no error line of make's. Its gRPC server follows its web port, and
every interface its card lists answers (SPEC §8.1); when one of its processes ends (a second
clone's `make run` finding its ports taken), it says which and stops the others.

Every process runs as an operator runs it, in its own session, on a throwaway SQLite site.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import httpx
import psutil
import pytest
import redis
from a2a.types import a2a_pb2, a2a_pb2_grpc

from tests.deploy.postgres import free_port
from tests.deploy.processes import answering
from tests.grpc.conftest import serving as grpc_serving
from tests.ops.conftest import make_run_argv
from tests.workers import redis_url

ROOT = Path(__file__).resolve().parents[2]
PROMISED_S = 10  # SPEC §16
REDIS_URL = redis_url()
BROKERS = {"orm": {}, "redis": {"CAIRN_REDIS_URL": REDIS_URL}}


@dataclass
class Site:
    env: dict[str, str]
    database: Path
    folder: Path


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Site:
    """A site of its own: a migrated SQLite file, settings from the environment alone (an empty
    settings file stands for the clone's `.env`, which the tests must not read or write)."""
    folder = tmp_path_factory.mktemp("site")
    database = folder / "cairn.sqlite3"
    settings_file = folder / "cairn.env"
    settings_file.write_text("")
    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("CAIRN_", "DATABASE_URL", "DEBUG"))
        },
        "PYTHONUNBUFFERED": "1",
        "CAIRN_ENV_FILE": str(settings_file),
        "DATABASE_URL": f"sqlite:///{database}",
        "DEBUG": "false",
        "SECRET_KEY": "cairn-stopping-test",
        "ALLOWED_HOSTS": "127.0.0.1",
        "CAIRN_SIGNING_KEY": os.environ["CAIRN_SIGNING_KEY"],
        "CAIRN_SEAL_KEY": os.environ["CAIRN_SEAL_KEY"],
        "CAIRN_WORKERS": "2",
    }
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    return Site(env=env, database=database, folder=folder)


@dataclass
class Started:
    """A process started in its own session (so it leads its process group), with its log."""

    process: subprocess.Popen
    log: Path
    env: dict[str, str]

    @property
    def pid(self) -> int:
        return self.process.pid

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, pattern: str, count: int = 1, timeout: float = 30) -> list[str]:
        give_up = time.monotonic() + timeout
        while time.monotonic() < give_up:
            found = re.findall(pattern, self.text())
            if len(found) >= count:
                return found
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"never logged {count} x {pattern!r}\n{self.tail()}")

    def group(self) -> list[psutil.Process]:
        """Every live process of its process group, wherever it was reparented."""
        found = []
        for process in psutil.process_iter():
            try:
                if os.getpgid(process.pid) == self.pid:
                    found.append(process)
            except (ProcessLookupError, psutil.NoSuchProcess):
                continue
        return found

    def seconds_to_stop(self, send: Callable[[Started], None]) -> float:
        """Send the signal(s); the seconds until it exited and no process of its group was left,
        or the promised bound and more when it did not."""
        started = time.monotonic()
        send(self)
        try:
            self.process.wait(timeout=PROMISED_S + 5)
        except subprocess.TimeoutExpired:
            return time.monotonic() - started
        while self.group() and time.monotonic() - started < PROMISED_S + 5:
            time.sleep(0.05)
        return time.monotonic() - started

    def tail(self, lines: int = 40) -> str:
        return f"--- {self.log} ---\n" + "\n".join(self.text().splitlines()[-lines:])

    def kill_group(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=10)


def _as_from_a_terminal() -> None:
    """SIGINT as a terminal's shell leaves it, whatever ran the tests: a runner started in the
    background by a shell without job control ignores SIGINT, and an ignored SIGINT is inherited
    by make and its shell, which then cannot trap it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(argv: list[str], env: dict[str, str], log: Path) -> Started:
    with open(log, "wb") as out:
        process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_as_from_a_terminal,
        )
    return Started(process, log, env)


@pytest.fixture(params=sorted(BROKERS))
def qcluster(request, site: Site, tmp_path) -> Iterator[Started]:
    """A running `manage.py qcluster`, its two workers ready."""
    if request.param == "redis":
        redis.Redis.from_url(REDIS_URL).flushdb()
    env = {**site.env, **BROKERS[request.param]}
    cluster = _start([sys.executable, "manage.py", "qcluster"], env, tmp_path / "qcluster.log")
    try:
        cluster.wait_for(r"Q Cluster \S+ \[\S+\] running\.")
        cluster.wait_for(r"ready for work at \d+", count=2)
        yield cluster
    finally:
        cluster.kill_group()


def _sigterm_to_the_process(cluster: Started) -> None:
    os.kill(cluster.pid, signal.SIGTERM)


def _sigterm_to_the_process_twice(cluster: Started) -> None:
    """The second while the master is busy with the first (django-q2's handler, entered again,
    waited for a lock it held itself)."""
    os.kill(cluster.pid, signal.SIGTERM)
    time.sleep(0.005)
    os.kill(cluster.pid, signal.SIGTERM)


def _sigterm_to_the_group(cluster: Started) -> None:
    """What `kill -TERM -- -PGID` and systemd's cgroup kill do: every process gets it."""
    os.killpg(cluster.pid, signal.SIGTERM)


def _sigterm_to_the_group_then_the_process(cluster: Started) -> None:
    """What `make run`'s shell sees: the group's signal, then its trap's `kill`."""
    os.killpg(cluster.pid, signal.SIGTERM)
    time.sleep(0.3)
    os.kill(cluster.pid, signal.SIGTERM)


def _ctrl_c(cluster: Started) -> None:
    """A terminal's Ctrl-C: SIGINT to the foreground process group."""
    os.killpg(cluster.pid, signal.SIGINT)


WAYS = [
    _sigterm_to_the_process,
    _sigterm_to_the_process_twice,
    _sigterm_to_the_group,
    _sigterm_to_the_group_then_the_process,
    _ctrl_c,
]


@pytest.mark.parametrize("send", WAYS, ids=lambda way: way.__name__.lstrip("_"))
def test_qcluster_stops_within_ten_seconds(qcluster: Started, send):
    time.sleep(1)  # past start-up: the sentinel guards its workers
    seconds = qcluster.seconds_to_stop(send)
    assert seconds <= PROMISED_S, f"qcluster took {seconds:.1f} s to stop\n{qcluster.tail()}"
    assert qcluster.process.returncode == 0, qcluster.tail()


@pytest.mark.parametrize(
    "send",
    [_sigterm_to_the_process, _sigterm_to_the_group],
    ids=lambda way: way.__name__.lstrip("_"),
)
def test_qcluster_stops_within_ten_seconds_after_a_worker_was_killed(qcluster: Started, send):
    worker = int(qcluster.wait_for(r"ready for work at (\d+)")[0])
    os.kill(worker, signal.SIGKILL)
    qcluster.wait_for("died unasked")
    qcluster.wait_for(r"ready for work at \d+", count=4)  # the cluster's processes anew
    seconds = qcluster.seconds_to_stop(send)
    assert seconds <= PROMISED_S, f"qcluster took {seconds:.1f} s to stop\n{qcluster.tail()}"


def test_the_job_in_hand_when_the_group_gets_sigterm_is_finished(qcluster: Started, site: Site):
    """The workers are not killed by the group's signal: a job shorter than the cluster's grace
    runs to its end and its result is saved."""
    name = f"nap {uuid.uuid4().hex}"
    subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            f"from django_q.tasks import async_task; async_task('time.sleep', 2, task_name='{name}')",
        ],
        cwd=ROOT,
        env=qcluster.env,
        check=True,
        capture_output=True,
    )
    qcluster.wait_for(f"processing {name}")
    seconds = qcluster.seconds_to_stop(_sigterm_to_the_group)
    assert seconds <= PROMISED_S, f"qcluster took {seconds:.1f} s to stop\n{qcluster.tail()}"
    with sqlite3.connect(site.database) as db:
        saved = db.execute("SELECT success FROM django_q_task WHERE name = ?", [name]).fetchall()
    assert saved == [(1,)], f"the job in hand was not finished\n{qcluster.tail()}"


@pytest.fixture
def make_run(site: Site, tmp_path) -> Iterator[tuple[Started, str, str]]:
    """`make run` as a developer starts it (`make_run_argv`). Its gRPC server listens on a free
    port of its own."""
    port = free_port()
    grpc_address = f"127.0.0.1:{free_port()}"
    argv = make_run_argv(port)
    env = {**site.env, "CAIRN_GRPC_BIND": grpc_address}
    started = _start(argv, env, tmp_path / "make-run.log")
    url = f"http://127.0.0.1:{port}"
    try:
        answering(url, started.process, seconds=60, log=started.tail)
        started.wait_for(r"ready for work at \d+", count=2)
        started.wait_for(r"A2A gRPC binding serving on")
        assert grpc_serving(grpc_address), started.tail()
        yield started, url, grpc_address
    finally:
        started.kill_group()


def test_make_run_prints_the_line_that_points_a_second_terminal_at_it(make_run):
    started, url, _ = make_run
    started.wait_for(rf"(?m)^  export CAIRN_URL={re.escape(url)}$")


@pytest.mark.parametrize(
    "send",
    [_sigterm_to_the_group, _ctrl_c, _sigterm_to_the_process],
    ids=["sigterm_to_the_group", "ctrl_c", "sigterm_to_make"],
)
def test_make_run_stops_on_one_signal(make_run, send):
    started, url, grpc_address = make_run
    seconds = started.seconds_to_stop(send)
    left = [process.pid for process in started.group()]
    assert seconds <= PROMISED_S and not left, (
        f"make run took {seconds:.1f} s, left {left}\n{started.tail()}"
    )
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{url}/healthz", timeout=1)
    assert not grpc_serving(grpc_address)
    # The shell exits quietly and make ends by the signal: no "make: *** ... Error 143".
    assert "make: ***" not in started.text(), started.tail()
    assert started.process.returncode in (-signal.SIGTERM, -signal.SIGINT), started.tail()


def _two_free_ports() -> int:
    """A free port whose next port is free too: `make run`'s web and gRPC ports."""
    while True:
        port = free_port()
        with socket.socket() as next_one:
            try:
                next_one.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port


def _interface_answers(interface: dict[str, str]) -> bool:
    """One read through the interface, as a client of that binding sends it: ListTasks (A2A 1.0),
    tasks/get of an unknown task (0.3, which has no list), answered with a result or an A2A
    error, not a transport failure."""
    url, binding, version = (
        interface["url"],
        interface["protocolBinding"],
        interface["protocolVersion"],
    )
    if binding == "GRPC":
        with grpc.insecure_channel(url) as channel:
            listed = a2a_pb2_grpc.A2AServiceStub(channel).ListTasks(
                a2a_pb2.ListTasksRequest(), metadata=(("a2a-version", "1.0"),), timeout=10
            )
        return isinstance(listed, a2a_pb2.ListTasksResponse)
    if binding == "HTTP+JSON":
        answer = httpx.get(f"{url}/tasks", headers={"A2A-Version": version}, timeout=10)
        return answer.status_code == 200 and "tasks" in answer.json()
    method, params = (
        ("ListTasks", {}) if version == "1.0" else ("tasks/get", {"id": str(uuid.uuid4())})
    )
    answer = httpx.post(
        url,
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
        headers={"A2A-Version": version},
        timeout=10,
    ).json()
    return "result" in answer or answer["error"]["code"] == -32001


# What `make run` says when one of its ports is taken: the gRPC server's words, uvicorn's.
PORT_TAKEN = re.compile(r"is it taken\?|address already in use", re.IGNORECASE)


@pytest.fixture
def make_run_on_its_own_ports(site: Site, tmp_path) -> Iterator[tuple[Started, int]]:
    """`make run` on a free port other than the default, gRPC left to follow it. The two ports
    come from the ephemeral range, where any process's next connection may take one before
    `make run` binds it: a start that stops for a taken port is tried again on two others."""
    env = {k: v for k, v in site.env.items() if k != "CAIRN_GRPC_BIND"}
    for attempt in range(3):
        port = _two_free_ports()
        started = _start(make_run_argv(port), env, tmp_path / f"make-run-{attempt}.log")
        try:
            answering(f"http://127.0.0.1:{port}", started.process, seconds=60, log=started.tail)
            break
        except RuntimeError:
            started.kill_group()
            if attempt == 2 or not PORT_TAKEN.search(started.text()):
                raise
    try:
        started.wait_for(r"A2A gRPC binding serving on")
        yield started, port
    finally:
        started.kill_group()


def test_make_run_serves_grpc_beside_its_web_port_and_every_interface_on_its_card_answers(
    make_run_on_its_own_ports,
):
    started, port = make_run_on_its_own_ports
    url = f"http://127.0.0.1:{port}"
    started.wait_for(rf"(?m)^gRPC on 127\.0\.0\.1:{port + 1} ")

    interfaces = httpx.get(f"{url}/.well-known/agent-card.json").json()["supportedInterfaces"]
    assert [(i["protocolBinding"], i["protocolVersion"], i["url"]) for i in interfaces] == [
        ("JSONRPC", "1.0", f"{url}/api/a2a"),
        ("HTTP+JSON", "1.0", f"{url}/api/a2a"),
        ("GRPC", "1.0", f"127.0.0.1:{port + 1}"),
        ("JSONRPC", "0.3", f"{url}/api/a2a"),
    ]
    assert all(_interface_answers(interface) for interface in interfaces)


def test_make_run_lets_a_developer_register_more_than_a_site_and_says_so(
    make_run_on_its_own_ports,
):
    """The walk-throughs register 14 agents, a site allows 20 an hour from one address: a
    developer running them again and again is not stopped."""
    started, port = make_run_on_its_own_ports
    started.wait_for(
        r"one address may register 1000 agents an hour \(CAIRN_REGISTRATIONS_PER_IP_PER_HOUR\)"
    )
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
        answers = [client.post("/api/agent/register", json={}).status_code for _ in range(21)]
    assert answers == [201] * 21


def test_a_second_make_run_on_taken_ports_says_so_and_stops(
    make_run_on_its_own_ports, site: Site, tmp_path
):
    """A second clone's `make run` on the same port: its gRPC server and its web server cannot
    listen, so it stops, naming what ended, rather than serve a card that points at the first
    clone's gRPC server. The first is untouched."""
    first, port = make_run_on_its_own_ports
    env = {k: v for k, v in site.env.items() if k != "CAIRN_GRPC_BIND"}
    second = _start(make_run_argv(port), env, tmp_path / "second-make-run.log")
    try:
        second.process.wait(timeout=60)
        assert second.process.returncode != 0, second.tail()
        said = re.findall(
            r"(?m)^make run: (.+) exited \(status \d+\): stopping Cairn$", second.text()
        )
        assert said and all(
            name.startswith(("the web server", "the gRPC server", "the worker")) for name in said
        ), second.tail()
        give_up = time.monotonic() + PROMISED_S
        while second.group() and time.monotonic() < give_up:
            time.sleep(0.1)
        assert not second.group(), second.tail()
    finally:
        second.kill_group()

    url = f"http://127.0.0.1:{port}"
    interfaces = httpx.get(f"{url}/.well-known/agent-card.json").json()["supportedInterfaces"]
    assert all(_interface_answers(interface) for interface in interfaces), first.tail()
