"""SPEC §8.7 behind a proxy: the gRPC server block of docs/deployment.md and its web block, run as
printed with only their placeholders replaced, in one nginx on one TLS port, in front of `python -m cairn.serve`
and `python -m cairn.grpc` on one private PostgreSQL.

The official a2a-sdk client allowed only gRPC reads the card through nginx's web block and makes
its calls through the gRPC block, over TLS checked against a certificate authority of the test's
own. The test's host names resolve nowhere, so the client dials 127.0.0.1 and names the gRPC host
in TLS (SNI, the certificate check and `:authority`), as it would after a DNS lookup; nginx picks
the gRPC block by that name, so a call that reached the web block instead would fail.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import httpx
import psycopg
import pytest
from a2a.client import A2AClientError, Client, ClientConfig, ClientFactory
from a2a.client.auth import AuthInterceptor
from a2a.helpers import new_data_part
from a2a.types import (
    GetTaskRequest,
    Message,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
    a2a_pb2_grpc,
)
from a2a.utils.constants import TransportProtocol
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.a2a.conftest import run
from tests.deploy.postgres import PrivatePostgres, certificate_authority, free_port
from tests.deploy.processes import Deployment, cairn_env
from tests.deploy.test_nginx import _nginx, _stop, printed_nginx_block, write_nginx_conf
from tests.docs import doc_block
from tests.factories import open_task_payload
from tests.grpc.conftest import Token

ROOT = Path(__file__).resolve().parents[2]
SERVER_NAME = "cairn.test"
GRPC_SERVER_NAME = "grpc.cairn.test"
DATABASE = "cairn_nginx_grpc"


def printed_grpc_block() -> str:
    """Deployment's nginx block that names the gRPC upstream, exactly as printed."""
    return doc_block("docs/deployment.md", "CAIRN_GRPC_UPSTREAM", "nginx")


def filled(block: str, placeholders: dict[str, str]) -> str:
    for placeholder, value in placeholders.items():
        assert placeholder in block, placeholder
        block = block.replace(placeholder, value)
    return block


def server_certificate(directory: Path) -> tuple[Path, Path, bytes]:
    """A certificate for both host names (and 127.0.0.1) signed by a new certificate authority:
    the certificate's and its key's paths, and the authority's PEM a client trusts."""
    ca_key, ca = certificate_authority("Cairn nginx test CA")
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, SERVER_NAME)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName(SERVER_NAME),
                    x509.DNSName(GRPC_SERVER_NAME),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cairn.crt", directory / "cairn.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path, ca.public_bytes(serialization.Encoding.PEM)


@dataclass
class Proxied:
    """Both bindings behind nginx: the https origin of the web block, the address the card gives
    gRPC clients, and the authority's PEM that verifies nginx's certificate."""

    site_url: str
    grpc_url: str
    ca_pem: bytes

    def channel_options(self) -> list[tuple[str, str]]:
        return [("grpc.ssl_target_name_override", GRPC_SERVER_NAME)]

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(root_certificates=self.ca_pem)

    def aio_channel(self, target: str) -> grpc.aio.Channel:
        return grpc.aio.secure_channel(target, self.credentials(), options=self.channel_options())

    def http_verify(self) -> ssl.SSLContext:
        return ssl.create_default_context(cadata=self.ca_pem.decode())


def _serving(proxied: Proxied, timeout: float = 2) -> health_pb2.HealthCheckResponse.ServingStatus:
    """The standard health service's answer through nginx."""
    with grpc.secure_channel(
        proxied.grpc_url, proxied.credentials(), options=proxied.channel_options()
    ) as channel:
        return (
            health_pb2_grpc.HealthStub(channel)
            .Check(health_pb2.HealthCheckRequest(), timeout=timeout)
            .status
        )


@pytest.fixture(scope="module")
def proxied(postgres: PrivatePostgres, tmp_path_factory) -> Iterator[Proxied]:
    nginx = _nginx()
    home = tmp_path_factory.mktemp("nginx-grpc")
    listen_port, grpc_port = free_port(), free_port()
    grpc_url = f"127.0.0.1:{listen_port}"  # where a client's lookup of GRPC_SERVER_NAME leads
    postgres.create_database(DATABASE)
    env = cairn_env(
        postgres.url(DATABASE),
        CAIRN_GRPC_BIND=f"127.0.0.1:{grpc_port}",
        CAIRN_GRPC_URL=grpc_url,
        CAIRN_LOG_FORMAT="json",
    )
    deployment = Deployment(
        broker="orm",
        postgres=postgres,
        database_url=postgres.url(DATABASE),
        env=env,
        logs=home,
    )
    nginx_process: subprocess.Popen | None = None
    try:
        deployment.manage("migrate", "--noinput")
        deployment.start_web()
        grpc_service = deployment._spawn("grpc", [sys.executable, "-m", "cairn.grpc"])
        cert, key, ca_pem = server_certificate(home)
        tls = {"TLS_CERTIFICATE_KEY": str(key), "TLS_CERTIFICATE": str(cert)}
        web_block = filled(
            printed_nginx_block(),
            {
                "CAIRN_UPSTREAM": deployment.web_urls[0].removeprefix("http://"),
                "SERVER_NAME": SERVER_NAME,
                "LISTEN_PORT": str(listen_port),
                "CACHE_PATH": str(home / "cache"),
                **tls,
            },
        )
        grpc_block = filled(
            printed_grpc_block(),
            {
                "CAIRN_GRPC_UPSTREAM": f"127.0.0.1:{grpc_port}",
                "GRPC_SERVER_NAME": GRPC_SERVER_NAME,
                "LISTEN_PORT": str(listen_port),
                **tls,
            },
        )
        # The web block first: nginx's default server on the port, for a client that names none.
        (home / "cairn.conf").write_text(f"{web_block}\n\n{grpc_block}\n")
        write_nginx_conf(home)
        nginx_log = home / "error.log"
        nginx_process = subprocess.Popen(
            [
                nginx,
                "-c",
                str(home / "nginx.conf"),
                "-p",
                str(home),
                "-g",
                f"daemon off; pid {home / 'nginx.pid'}; error_log {nginx_log} info;",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        found = Proxied(
            site_url=f"https://127.0.0.1:{listen_port}", grpc_url=grpc_url, ca_pem=ca_pem
        )
        give_up = time.monotonic() + 30
        while True:
            try:
                if _serving(found) == health_pb2.HealthCheckResponse.SERVING:
                    break
            except grpc.RpcError:
                pass
            if time.monotonic() > give_up or grpc_service.process.poll() is not None:
                raise RuntimeError(
                    f"cairn.grpc did not answer through nginx\n{grpc_service.tail()}\n"
                    f"--- nginx ---\n{nginx_log.read_text(errors='replace')[-3000:]}"
                )
            time.sleep(0.2)
        yield found
    finally:
        if nginx_process is not None:
            _stop(nginx_process)
        deployment.stop_all()
        with psycopg.connect(postgres.url("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')


@asynccontextmanager
async def grpc_client(proxied: Proxied, token: str | None = None) -> AsyncIterator[Client]:
    """The official a2a-sdk client made from the card nginx serves, allowed only gRPC, its
    channels TLS to nginx trusting the test's authority only."""
    interceptors = [AuthInterceptor(Token(token))] if token else []
    async with httpx.AsyncClient(verify=proxied.http_verify(), timeout=20) as http_client:
        config = ClientConfig(
            httpx_client=http_client,
            supported_protocol_bindings=[TransportProtocol.GRPC],
            grpc_channel_factory=proxied.aio_channel,
        )
        client = await ClientFactory(config).create_from_url(
            proxied.site_url, interceptors=interceptors
        )
        async with client:
            yield client


def sent(payload: dict) -> Message:
    return Message(
        message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[new_data_part(payload)]
    )


async def send(client: Client, message: Message) -> Task | Message:
    (answer,) = [event async for event in client.send_message(SendMessageRequest(message=message))]
    kind = answer.WhichOneof("payload")
    assert kind in ("task", "message"), answer
    return getattr(answer, kind)


def register(proxied: Proxied) -> str:
    """A new agent's token, registered through nginx's web block."""
    with httpx.Client(verify=proxied.http_verify(), timeout=20) as client:
        answer = client.post(f"{proxied.site_url}/api/agent/register", json={})
    assert answer.status_code == 201, answer.text
    return answer.json()["token"]


def test_the_health_check_answers_serving_through_nginx(proxied: Proxied):
    assert _serving(proxied) == health_pb2.HealthCheckResponse.SERVING


def test_the_card_sends_grpc_clients_through_nginx(proxied: Proxied):
    with httpx.Client(verify=proxied.http_verify(), timeout=20) as client:
        card = client.get(f"{proxied.site_url}/.well-known/agent-card.json").json()
    grpc_urls = [
        interface["url"]
        for interface in card["supportedInterfaces"]
        if interface["protocolBinding"] == "GRPC"
    ]
    assert grpc_urls == [proxied.grpc_url]


def test_a_task_posted_over_grpc_through_nginx_reads_back_the_same(proxied: Proxied):
    """The token travels as `authorization` metadata through nginx, and the read answers the very
    Task the post did."""
    token = register(proxied)

    async def post_and_read() -> tuple[Task | Message, Task]:
        async with grpc_client(proxied, token) as client:
            posted = await send(client, sent(open_task_payload()))
            assert isinstance(posted, Task), posted
            return posted, await client.get_task(GetTaskRequest(id=posted.id))

    posted, read = run(post_and_read())
    assert isinstance(posted, Task)
    assert posted.status.state == TaskState.TASK_STATE_WORKING
    assert read == posted


def test_send_message_without_a_token_is_unauthenticated_through_nginx(proxied: Proxied):
    async def post() -> None:
        async with grpc_client(proxied) as client:
            await send(client, sent(open_task_payload()))

    with pytest.raises(A2AClientError) as refused:
        run(post())

    cause = refused.value.__cause__
    assert isinstance(cause, grpc.aio.AioRpcError), refused.value
    assert cause.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "Bearer" in str(cause.details())


def test_a_message_over_256_kib_meets_cairns_refusal_not_nginxs(proxied: Proxied):
    """nginx's body cap sits above Cairn's, so an oversized message gets the RESOURCE_EXHAUSTED
    a gRPC client understands rather than an HTTP status it can only call UNKNOWN."""
    message = sent({"padding": "x" * (300 * 1024)})
    with grpc.secure_channel(
        proxied.grpc_url, proxied.credentials(), options=proxied.channel_options()
    ) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            a2a_pb2_grpc.A2AServiceStub(channel).SendMessage(
                SendMessageRequest(message=message),
                metadata=(("a2a-version", "1.0"),),
                timeout=20,
            )
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, refused.value
