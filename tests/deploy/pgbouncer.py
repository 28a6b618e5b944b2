"""A PgBouncer of the test's own in transaction pooling mode, in front of a `PrivatePostgres`:
Debian's package (`apt-get install pgbouncer`), run as a process of its own with a generated
configuration in a temporary folder."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from tests.deploy.postgres import PrivatePostgres, free_port

BINARY = shutil.which("pgbouncer") or (
    "/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None
)


class TransactionPgBouncer:
    """Every server connection goes back to the pool at the end of each transaction, so a
    session's state (a named prepared statement, a session SET, a held cursor) is lost to the
    client's next transaction. PgBouncer refuses to run as root: as root it runs as `postgres`."""

    def __init__(self, postgres: PrivatePostgres) -> None:
        assert BINARY is not None
        self.root = Path(tempfile.mkdtemp(prefix="cairn-pgbouncer-"))
        self.port = free_port()
        self.log = self.root / "pgbouncer.log"
        (self.root / "userlist.txt").write_text('"postgres" ""\n')
        self.ini = self.root / "pgbouncer.ini"
        self.ini.write_text(
            "[databases]\n"
            f"* = host=127.0.0.1 port={postgres.port}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\n"
            f"unix_socket_dir = {self.root}\n"
            f"auth_type = trust\nauth_file = {self.root / 'userlist.txt'}\n"
            "pool_mode = transaction\n"
            "max_client_conn = 1000\ndefault_pool_size = 20\n"
            f"logfile = {self.log}\n"
        )
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            self._as_user = ["runuser", "-u", "postgres", "--"]
            for path in (self.root, *self.root.iterdir()):
                shutil.chown(path, "postgres")
        self.process: subprocess.Popen | None = None

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def start(self, timeout: float = 20) -> None:
        self.process = subprocess.Popen(
            [*self._as_user, BINARY, str(self.ini)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        give_up = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.url("postgres"), connect_timeout=2, autocommit=True):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > give_up or self.process.poll() is not None:
                    raise RuntimeError(f"PgBouncer did not start\n{self.tail()}") from None
                time.sleep(0.2)

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return f"--- pgbouncer ({self.log}) ---\n" + "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)
