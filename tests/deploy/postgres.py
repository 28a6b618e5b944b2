"""A PostgreSQL server of the test's own: a fresh cluster (`initdb`) in a temporary folder on a
free port, so a test can stop and restart it without touching the machine's shared server."""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
import psycopg
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _bin_dir() -> Path | None:
    found = shutil.which("initdb")
    if found:
        # Where the server's own binaries are (a link on PATH may stand for initdb alone):
        # pg_basebackup is beside them.
        return Path(found).resolve().parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return versions[-1].parent if versions else None


BIN_DIR = _bin_dir()


def certificate_authority(name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A self-signed certificate authority, valid for a day."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return key, certificate


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PrivatePostgres:
    """One cluster, trust auth on 127.0.0.1. PostgreSQL refuses to run as root, so as root the
    server runs as the `postgres` system user. With `tls`, the server also speaks TLS, with a
    certificate for 127.0.0.1 signed by a certificate authority of its own (`ca_file`)."""

    def __init__(
        self,
        *,
        tls: bool = False,
        replica_of: PrivatePostgres | None = None,
        made_by: Callable[[Path], None] | None = None,
        port: int | None = None,
    ) -> None:
        """`replica_of`: a streaming replica of that running server, copied from it by
        `pg_basebackup -R` (which writes the replica's connection to it), not a cluster of its own.
        `made_by`: what fills the data directory instead (a block of the docs, say), handed its
        path, not yet made, in a folder the server's user owns. `port`: the one to listen on,
        another server's that is gone, say; by default a free one."""
        assert BIN_DIR is not None
        # In /tmp itself: pytest's own temporary folders are closed to other users.
        root = Path(tempfile.mkdtemp(prefix="cairn-postgres-"))
        self.root = root
        self.data = root / "data"
        self.log = root / "postgres.log"
        self.port = port or free_port()
        self.killed = False
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            self._as_user = ["runuser", "-u", "postgres", "--"]
            shutil.chown(root, "postgres")
        if made_by is not None:
            made_by(self.data)
        elif replica_of is None:
            self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")
        else:
            self._run(
                "pg_basebackup",
                *("-h", "127.0.0.1", "-p", str(replica_of.port), "-U", "postgres"),
                *("-D", str(self.data), "-R", "-X", "stream", "-c", "fast", "--no-sync"),
            )
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(
                f"port = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{root}'\nmax_connections = 200\nfsync = off\n"
            )
        self.ca_file = root / "ca.pem"
        if tls:
            self._make_certificates()
            with open(self.data / "postgresql.conf", "a") as conf:
                conf.write("ssl = on\n")

    def _make_certificates(self) -> None:
        ca_key, ca = certificate_authority("Cairn test CA")
        self.ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.now(UTC)
        server = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + timedelta(days=1))
            .add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        (self.data / "server.crt").write_bytes(server.public_bytes(serialization.Encoding.PEM))
        key_file = self.data / "server.key"
        key_file.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        key_file.chmod(0o600)
        if self._as_user:
            for made in (self.ca_file, self.data / "server.crt", key_file):
                shutil.chown(made, "postgres")

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
        """A fast shutdown, as an operator's restart does: sessions are ended, not waited for.
        Nothing once killed: the pid its data directory still names may be another process's."""
        if self.killed:
            return
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def kill(self) -> None:
        """SIGKILL to the server and every process of it at once, as a crash of its host leaves
        it: no shutdown checkpoint, nothing flushed that was not already."""
        postmaster = psutil.Process(int((self.data / "postmaster.pid").read_text().split()[0]))
        family = [postmaster, *postmaster.children(recursive=True)]
        for process in family:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(family, timeout=10)
        self.killed = True

    def sql(self, statement: str, *params: object, database: str = "postgres") -> list[tuple]:
        with psycopg.connect(self.url(database), autocommit=True) as conn:
            cursor = conn.execute(statement, params)
            return cursor.fetchall() if cursor.description else []

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

    def promote(self) -> None:
        """A standby becomes a primary that takes writes."""
        self._run("pg_ctl", "-D", str(self.data), "-w", "promote")

    def stream_stopped(self) -> None:
        """A standby stops receiving the primary's WAL, falling behind it: an asynchronous
        standby whose network to the primary failed."""
        with open(self.data / "postgresql.auto.conf", "a") as conf:
            conf.write("primary_conninfo = ''\n")
        self._run("pg_ctl", "-D", str(self.data), "reload")
