"""A PostgreSQL server of the test's own: a fresh cluster (`initdb`) in a temporary folder on a
free port, so a test can stop and restart it without touching the machine's shared server."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg


def _bin_dir() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return versions[-1].parent if versions else None


BIN_DIR = _bin_dir()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PrivatePostgres:
    """One cluster, trust auth on 127.0.0.1. PostgreSQL refuses to run as root, so as root the
    server runs as the `postgres` system user."""

    def __init__(self) -> None:
        assert BIN_DIR is not None
        # In /tmp itself: pytest's own temporary folders are closed to other users.
        root = Path(tempfile.mkdtemp(prefix="cairn-postgres-"))
        self.root = root
        self.data = root / "data"
        self.log = root / "postgres.log"
        self.port = free_port()
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            self._as_user = ["runuser", "-u", "postgres", "--"]
            shutil.chown(root, "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(
                f"port = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{root}'\nmax_connections = 200\nfsync = off\n"
            )

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run(
            [*self._as_user, str(BIN_DIR / tool), *args],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "start")

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def stop(self) -> None:
        """A fast shutdown, as an operator's restart does: sessions are ended, not waited for."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def create_database(self, name: str) -> None:
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

    def wait_ready(self, timeout: float = 30) -> None:
        give_up = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.url("postgres"), connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > give_up:
                    raise
                time.sleep(0.2)
