"""Cairn as an operator runs it: uvicorn web processes and `manage.py qcluster` workers, each a
separate OS process, on one PostgreSQL database."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

from tests.deploy.postgres import PrivatePostgres, free_port

ROOT = Path(__file__).resolve().parents[2]
_LOG_STATES = Path(tempfile.mkdtemp(prefix="cairn-log-states-"))


def log_state_path(database_url: str) -> Path:
    """The log state file (SPEC §16.2) of the site on `database_url`: one per database, shared
    by its processes, as an operator keeps it beside the keys."""
    return _LOG_STATES / (hashlib.sha256(database_url.encode()).hexdigest()[:16] + ".json")


def cairn_env(database_url: str, **settings: str) -> dict[str, str]:
    """The environment of a deployment's processes: this one's, without any Cairn setting of its
    own, with limits out of the tests' way unless `settings` set them."""
    return {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("CAIRN_", "DATABASE_URL", "DEBUG"))
        },
        "PYTHONUNBUFFERED": "1",
        "DATABASE_URL": database_url,
        "DEBUG": "false",
        "SECRET_KEY": "cairn-deployment-test",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "CAIRN_TASK_DEADLINE_MIN_S": "1",
        "CAIRN_TASKS_PER_AGENT_PER_DAY": "10000",
        "CAIRN_OPEN_TASKS_PER_AGENT": "10000",
        "CAIRN_CONTRIBUTIONS_PER_AGENT_PER_DAY": "10000",
        "CAIRN_REGISTRATIONS_PER_IP_PER_HOUR": "10000",
        "CAIRN_WORKERS": "2",
        "CAIRN_SIGNING_KEY": os.environ["CAIRN_SIGNING_KEY"],
        "CAIRN_SEAL_KEY": os.environ["CAIRN_SEAL_KEY"],
        "CAIRN_LOG_STATE": str(log_state_path(database_url)),
        **settings,
    }


def answering(
    url: str, process: subprocess.Popen, *, seconds: float, log: Callable[[], str]
) -> None:
    """Wait until `url`'s /healthz answers 200; fail with the process's `log` when it ends first
    or `seconds` pass."""
    give_up = time.monotonic() + seconds
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > give_up or process.poll() is not None:
            raise RuntimeError(f"{url} did not start serving\n{log()}")
        time.sleep(0.2)


@dataclass
class Service:
    name: str
    process: subprocess.Popen
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def tree(self) -> list[psutil.Process]:
        """This process and every process it forked (a qcluster's sentinel, workers, monitor, pusher)."""
        try:
            top = psutil.Process(self.pid)
            return [top, *top.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def announced_pids(self, role: str, count: int) -> list[int]:
        """The pids a qcluster's log announces for a role ("pushing tasks", "ready for work")."""
        give_up = time.monotonic() + 20
        while time.monotonic() < give_up:
            found = re.findall(rf"{role} at (\d+)", self.log.read_text(errors="replace"))
            if len(found) >= count:
                return [int(pid) for pid in found[:count]]
            time.sleep(0.2)
        raise AssertionError(f"{self.name} never announced {count} x {role!r}\n{self.tail()}")

    def kill_all(self) -> None:
        """SIGKILL to the whole process group, as a crash of the host process would leave it."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=10)

    def terminate(self, timeout: float) -> float:
        """SIGTERM, then the seconds until the process and all its children were gone."""
        family = self.tree()
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=timeout)
        psutil.wait_procs(family, timeout=max(0.1, timeout - (time.monotonic() - started)))
        return time.monotonic() - started

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return f"--- {self.name} ({self.log}) ---\n" + "\n".join(text.splitlines()[-lines:])


@dataclass
class Deployment:
    """The environment of one deployment and the services started in it."""

    broker: str
    postgres: PrivatePostgres
    database_url: str
    env: dict[str, str]
    logs: Path
    services: list[Service] = field(default_factory=list)
    web_urls: list[str] = field(default_factory=list)

    def _spawn(self, name: str, argv: list[str]) -> Service:
        log = self.logs / f"{name}-{len(self.services)}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                argv,
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        service = Service(name, process, log)
        self.services.append(service)
        return service

    def manage(self, *args: str) -> None:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, f"manage.py {' '.join(args)} failed:\n{done.stderr[-3000:]}"

    def start_web(self, port: int | None = None) -> Service:
        """A web process on `port` (a free one by default), once it answers."""
        port = port or free_port()
        service = self._spawn("web", [sys.executable, "-m", "cairn.serve", "--port", str(port)])
        url = f"http://127.0.0.1:{port}"
        answering(url, service.process, seconds=30, log=service.tail)
        self.web_urls.append(url)
        return service

    def start_worker(self) -> Service:
        return self._spawn("qcluster", [sys.executable, "manage.py", "qcluster"])

    def workers(self) -> list[Service]:
        return [s for s in self.services if s.name == "qcluster" and s.process.poll() is None]

    def stop_all(self) -> None:
        for service in self.services:
            if service.process.poll() is None:
                service.kill_all()

    def tails(self) -> str:
        return "\n".join(service.tail() for service in self.services)


def _tcp_inodes_to(port: int) -> dict[int, int]:
    """The TCP sockets connected to `port`: each one's inode, with its own (local) port."""
    inodes: dict[int, int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[2].rsplit(":", 1)[1], 16) == port:
                inodes[int(fields[9])] = int(fields[1].rsplit(":", 1)[1], 16)
    return inodes


def database_sockets(
    processes: list[psutil.Process], port: int, wanted: dict[int, int] | None = None
) -> dict[int, set[int]]:
    """For each process, the inodes of its TCP sockets connected to the database's port (of
    those in `wanted`, one reading of the kernel's table, when given)."""
    if wanted is None:
        wanted = _tcp_inodes_to(port)
    held: dict[int, set[int]] = {}
    for process in processes:
        try:
            fds = list(Path(f"/proc/{process.pid}/fd").iterdir())
        except (FileNotFoundError, PermissionError):
            continue
        inodes = held.setdefault(process.pid, set())
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:[") and int(target[8:-1]) in wanted:
                inodes.add(int(target[8:-1]))
    return held


def database_client_ports(processes: list[psutil.Process], port: int) -> dict[int, set[int]]:
    """For each process, the client ports of its connections to the database's port (what
    `pg_stat_activity.client_port` shows for them). One reading of the kernel's table serves
    both lookups, so a connection closed in between is left out rather than half-seen."""
    ports = _tcp_inodes_to(port)
    return {
        pid: {ports[inode] for inode in inodes}
        for pid, inodes in database_sockets(processes, port, ports).items()
    }


def shared_connections(held: dict[int, set[int]]) -> dict[int, set[int]]:
    """The database connections (socket inodes) that more than one process holds, with their pids."""
    owners: dict[int, set[int]] = {}
    for pid, inodes in held.items():
        for inode in inodes:
            owners.setdefault(inode, set()).add(pid)
    return {inode: pids for inode, pids in owners.items() if len(pids) > 1}
