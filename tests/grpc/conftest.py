"""The gRPC binding as it is served: `python -m cairn.grpc` in its own process on the test
database, driven by the official a2a-sdk client allowed only gRPC, which finds the server on the
card the live web server publishes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import grpc
import httpx
import pytest
from a2a.client import Client, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.auth import AuthInterceptor, CredentialService
from a2a.types import a2a_pb2_grpc
from a2a.utils.constants import TransportProtocol
from django.db import connection
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.deploy.postgres import free_port

ROOT = Path(__file__).resolve().parents[2]
VERSION = (("a2a-version", "1.0"),)


def tests_database_url() -> str:
    """The database the tests run on, as a URL another process can open."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    host, port = db["HOST"] or "127.0.0.1", db["PORT"] or 5432
    return f"postgres://{db['USER']}@{host}:{port}/{db['NAME']}"


@dataclass
class GrpcServer:
    """One `python -m cairn.grpc`, in its own session (it leads its process group)."""

    address: str
    process: subprocess.Popen
    log: Path
    metrics: Path

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return f"--- {self.log} ---\n" + "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.process.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)


def serving(address: str, timeout: float = 1) -> bool:
    """Whether the standard health service at `address` says SERVING."""
    with grpc.insecure_channel(address) as channel:
        try:
            answer = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=timeout
            )
        except grpc.RpcError:
            return False
    return answer.status == health_pb2.HealthCheckResponse.SERVING


def start_grpc_server(folder: Path, **settings: str) -> GrpcServer:
    """`python -m cairn.grpc` on a free port of its own, against the test database, logging JSON
    to a file and its metrics to a folder of their own; returned once it serves."""
    address = f"127.0.0.1:{free_port()}"
    metrics = folder / "metrics"
    metrics.mkdir()
    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("CAIRN_", "DATABASE_URL", "PROMETHEUS_"))
        },
        "PYTHONUNBUFFERED": "1",
        "CAIRN_ENV_FILE": os.devnull,
        "DATABASE_URL": tests_database_url(),
        "CAIRN_GRPC_BIND": address,
        "CAIRN_LOG_FORMAT": "json",
        "PROMETHEUS_MULTIPROC_DIR": str(metrics),
        "CAIRN_TASK_DEADLINE_MIN_S": "1",
        "CAIRN_TASKS_PER_AGENT_PER_DAY": "1000",
        "CAIRN_OPEN_TASKS_PER_AGENT": "1000",
        "CAIRN_CONTRIBUTIONS_PER_AGENT_PER_DAY": "1000",
        "CAIRN_SIGNING_KEY": os.environ["CAIRN_SIGNING_KEY"],
        "CAIRN_SEAL_KEY": os.environ["CAIRN_SEAL_KEY"],
        **settings,
    }
    log = folder / "grpc.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "cairn.grpc"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = GrpcServer(address, process, log, metrics)
    give_up = time.monotonic() + 30
    while not serving(address):
        if time.monotonic() > give_up or process.poll() is not None:
            server.stop()
            raise RuntimeError(f"python -m cairn.grpc did not start serving\n{server.tail()}")
        time.sleep(0.1)
    return server


@contextmanager
def running_grpc_server(folder: Path, **settings: str) -> Iterator[GrpcServer]:
    """`start_grpc_server` for the length of a block, then SIGTERM (killed if it lingers), so a
    module's server is gone before the test database is dropped. Other test folders (the parity
    corpus) serve their gRPC column with it, under their own settings."""
    server = start_grpc_server(folder, **settings)
    try:
        yield server
    finally:
        server.process.send_signal(signal.SIGTERM)
        try:
            server.process.wait(timeout=15)
        finally:
            server.stop()


@contextmanager
def stub_of_its_own(folder: Path) -> Iterator[a2a_pb2_grpc.A2AServiceStub]:
    """The SDK's generated stub on a gRPC server of its own, for a module of another folder."""
    with running_grpc_server(folder) as server, grpc.insecure_channel(server.address) as channel:
        yield a2a_pb2_grpc.A2AServiceStub(channel)


@pytest.fixture(scope="module")
def grpc_server(django_db_setup, tmp_path_factory) -> Iterator[GrpcServer]:
    """One gRPC server for a module's tests; stopped before the test database is dropped."""
    with running_grpc_server(tmp_path_factory.mktemp("grpc")) as server:
        yield server


@pytest.fixture
def card_url(live_url: str, grpc_server: GrpcServer, settings) -> str:
    """The live web server's URL, whose card lists the module's gRPC server."""
    settings.CAIRN_GRPC_URL = grpc_server.address
    return live_url


@pytest.fixture
def stub(grpc_server: GrpcServer) -> Iterator[a2a_pb2_grpc.A2AServiceStub]:
    """The SDK's generated stub, for what its client will not send (no version, no card)."""

    channel = grpc.insecure_channel(grpc_server.address)
    yield a2a_pb2_grpc.A2AServiceStub(channel)
    channel.close()


class Token(CredentialService):
    """The agent's token for the card's bearer scheme, as an agent's credential store gives it."""

    def __init__(self, token: str) -> None:
        self.token = token

    async def get_credentials(
        self, security_scheme_name: str, context: ClientCallContext | None
    ) -> str | None:
        return self.token


@asynccontextmanager
async def grpc_client(card_url: str, token: str | None = None) -> AsyncIterator[Client]:
    """The official a2a-sdk client made from the card at `card_url`, allowed only gRPC; the
    token goes through the SDK's own auth interceptor, which reads the card's bearer scheme."""
    interceptors = [AuthInterceptor(Token(token))] if token else []
    async with httpx.AsyncClient(timeout=20) as http_client:
        config = ClientConfig(
            httpx_client=http_client,
            supported_protocol_bindings=[TransportProtocol.GRPC],
            grpc_channel_factory=grpc.aio.insecure_channel,
        )
        client = await ClientFactory(config).create_from_url(card_url, interceptors=interceptors)
        async with client:
            yield client
