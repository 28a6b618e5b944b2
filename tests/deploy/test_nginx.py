"""SPEC §16, behind a proxy: the nginx configuration of docs/deployment.md, run as printed with
only its placeholders replaced, in front of `python -m cairn.serve` with an https `CAIRN_SITE_URL`.

The printed block is what an operator puts in conf.d; the main file around it here stands in
for the system's nginx.conf (events, and the log and temporary paths a private prefix needs).
The client connects from 127.0.0.2, an address that is not nginx's and not in
`FORWARDED_ALLOW_IPS`, as a client on the Internet would.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.deploy.postgres import free_port
from tests.docs import doc_block

ROOT = Path(__file__).resolve().parents[2]
SERVER_NAME = "cairn.test"
CLIENT_ADDRESS = "127.0.0.2"
REGISTRATIONS_PER_HOUR = 3


def printed_nginx_block() -> str:
    """Deployment's nginx block that names the upstream, exactly as printed."""
    return doc_block("docs/deployment.md", "CAIRN_UPSTREAM", "nginx")


def self_signed(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, SERVER_NAME)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(SERVER_NAME), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
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
    return cert_path, key_path


def write_nginx_conf(home: Path) -> None:
    """An nginx.conf of the test's own, everything under `home`, that includes `home`'s
    cairn.conf: the blocks as printed. Started as root, nginx runs its workers as
    `nobody`, who may not enter the test's private folders, where the workers write the cache:
    they run as the test's own user instead, as Debian's nginx.conf names `www-data`."""
    temp_paths = "\n".join(
        f"    {kind}_temp_path {home / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    workers_user = f"user {pwd.getpwuid(os.geteuid()).pw_name};\n" if os.geteuid() == 0 else ""
    (home / "nginx.conf").write_text(
        f"{workers_user}"
        "events {}\n"
        "http {\n"
        f"    access_log {home / 'access.log'};\n"
        f"{temp_paths}\n"
        f"    include {home / 'cairn.conf'};\n"
        "}\n"
    )


def _nginx() -> str:
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    if found is None:
        pytest.fail("nginx is needed for the reverse-proxy test: apt-get install nginx")
    return found


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def _wait_until_answering(url: str, host: str, what: str, log: Path, **transport) -> None:
    give_up = time.monotonic() + 30
    with httpx.Client(transport=httpx.HTTPTransport(**transport), timeout=2) as client:
        while True:
            try:
                if client.get(url, headers={"Host": host}).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < give_up, f"{what} did not answer:\n{log.read_text()}"
            time.sleep(0.2)


@dataclass
class Proxied:
    """Cairn behind nginx: the https origin clients use, cairn.serve's own address, and what
    starts and stops cairn.serve (nginx stays up)."""

    site_url: str
    https_port: int
    upstream: str
    home: Path
    env: dict[str, str]
    web: subprocess.Popen | None = None

    def start_cairn(self) -> None:
        log = self.home / "web.log"
        with open(log, "ab") as out:
            self.web = subprocess.Popen(
                [sys.executable, "-m", "cairn.serve", "--port", self.upstream.rsplit(":", 1)[1]],
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _wait_until_answering(f"http://{self.upstream}/healthz", SERVER_NAME, "cairn.serve", log)

    def stop_cairn(self) -> None:
        if self.web is not None:
            _stop(self.web)
            self.web = None


@contextmanager
def behind_nginx(home: Path, **settings: str) -> Iterator[Proxied]:
    """cairn.serve (its environment given `settings`) on a SQLite database of its own, behind the
    printed nginx block, its placeholders filled; everything stopped after."""
    nginx = _nginx()
    listen_port, upstream_port = free_port(), free_port()
    site_url = f"https://{SERVER_NAME}:{listen_port}"
    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("CAIRN_", "DATABASE_URL", "DEBUG", "ALLOWED_HOSTS"))
        },
        "PYTHONUNBUFFERED": "1",
        "DEBUG": "false",
        "SECRET_KEY": "cairn-nginx-test",
        "CAIRN_ENV_FILE": os.devnull,
        "CAIRN_SITE_URL": site_url,
        # gRPC is not behind this HTTP proxy (test_nginx_grpc.py puts it there): off, so the card
        # lists no address its clients cannot reach.
        "CAIRN_GRPC_BIND": "",
        "FORWARDED_ALLOW_IPS": "127.0.0.1",
        "DATABASE_URL": f"sqlite:///{home / 'cairn.sqlite3'}",
        "CAIRN_SIGNING_KEY": os.environ["CAIRN_SIGNING_KEY"],
        "CAIRN_SEAL_KEY": os.environ["CAIRN_SEAL_KEY"],
        **settings,
    }
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    site = Proxied(
        site_url=site_url,
        https_port=listen_port,
        upstream=f"127.0.0.1:{upstream_port}",
        home=home,
        env=env,
    )
    nginx_process: subprocess.Popen | None = None
    try:
        site.start_cairn()
        cert, key = self_signed(home)
        site_conf = printed_nginx_block()
        for placeholder, value in {
            "CAIRN_UPSTREAM": site.upstream,
            "SERVER_NAME": SERVER_NAME,
            "LISTEN_PORT": str(listen_port),
            "TLS_CERTIFICATE_KEY": str(key),
            "TLS_CERTIFICATE": str(cert),
            "CACHE_PATH": str(home / "cache"),
        }.items():
            assert placeholder in site_conf, placeholder
            site_conf = site_conf.replace(placeholder, value)
        (home / "cairn.conf").write_text(site_conf)
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
        _wait_until_answering(
            f"https://127.0.0.1:{listen_port}/healthz",
            f"{SERVER_NAME}:{listen_port}",
            "nginx",
            nginx_log,
            verify=False,
        )
        yield site
    finally:
        if nginx_process is not None:
            _stop(nginx_process)
        site.stop_cairn()


@pytest.fixture(scope="module")
def proxied(tmp_path_factory) -> Iterator[Proxied]:
    with behind_nginx(
        tmp_path_factory.mktemp("nginx"),
        CAIRN_REGISTRATIONS_PER_IP_PER_HOUR=str(REGISTRATIONS_PER_HOUR),
    ) as site:
        yield site


@pytest.fixture
def client(proxied: Proxied) -> Iterator[httpx.Client]:
    """A client on its own address, talking https to nginx under the site's name."""
    transport = httpx.HTTPTransport(verify=False, local_address=CLIENT_ADDRESS)
    with httpx.Client(
        transport=transport,
        base_url=f"https://127.0.0.1:{proxied.https_port}",
        headers={"Host": f"{SERVER_NAME}:{proxied.https_port}"},
        timeout=20,
    ) as client:
        yield client


def test_a_spoofed_forwarded_for_earns_no_registrations(client):
    answers = [
        client.post(
            "/api/agent/register",
            json={"label": f"spoofer {n}"},
            headers={"X-Forwarded-For": f"203.0.113.{n}"},
        ).status_code
        for n in range(REGISTRATIONS_PER_HOUR + 3)
    ]
    assert answers == [201] * REGISTRATIONS_PER_HOUR + [429] * 3


def test_https_answers_carry_hsts_and_the_csrf_cookie_is_secure(client):
    login = client.get("/admin/login/")
    assert login.status_code == 200
    assert login.headers["Strict-Transport-Security"] == "max-age=31536000"
    csrf_cookie = next(
        header for header in login.headers.get_list("Set-Cookie") if header.startswith("csrftoken=")
    )
    assert "secure" in [part.strip().lower() for part in csrf_cookie.split(";")]

    card = client.get("/.well-known/agent-card.json")
    assert card.headers["Strict-Transport-Security"] == "max-age=31536000"


def test_the_agent_card_gives_the_https_url(client, proxied: Proxied):
    card = client.get("/.well-known/agent-card.json")
    assert card.status_code == 200
    urls = [interface["url"] for interface in card.json()["supportedInterfaces"]]
    assert urls and all(url == f"{proxied.site_url}/api/a2a" for url in urls), urls


def test_only_the_trusted_proxy_can_say_a_request_came_over_https(proxied: Proxied):
    """Straight to cairn.serve, a client that claims https in X-Forwarded-Proto is not believed
    (no HSTS on a plain-http answer); the same claim from FORWARDED_ALLOW_IPS is."""
    claims = {"Host": SERVER_NAME, "X-Forwarded-Proto": "https"}
    url = f"http://{proxied.upstream}/admin/login/"
    with httpx.Client(transport=httpx.HTTPTransport(local_address=CLIENT_ADDRESS)) as stranger:
        assert "Strict-Transport-Security" not in stranger.get(url, headers=claims).headers
    with httpx.Client() as proxy:
        assert "Strict-Transport-Security" in proxy.get(url, headers=claims).headers
