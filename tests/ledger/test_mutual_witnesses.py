"""SPEC §15.4: two Cairn sites, each a separate server with its own database and keys, witness
each other's log: each site's sequencer has its checkpoints cosigned by the other site's witness,
and the served verifier, pinning that witness from the card, accepts the log."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.signed_note import COSIGNATURE_V1, ED25519, private_verifier_key
from tests.deploy.postgres import free_port
from tests.deploy.processes import ROOT, answering, cairn_env
from tests.factories import open_task_payload


def _pem(key: Ed25519PrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


@dataclass
class Site:
    """One Cairn site: its port, its keys, its database, and its web process."""

    name: str
    folder: Path
    port: int
    site_key: Ed25519PrivateKey
    witness_key: Ed25519PrivateKey
    process: subprocess.Popen | None = None
    env: dict[str, str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_key(self) -> str:
        return private_verifier_key(
            f"127.0.0.1:{self.port}/cairn/log", self.site_key, type=ED25519
        ).text

    @property
    def witness_vkey(self) -> str:
        name = f"127.0.0.1:{self.port}/cairn/witness"
        return private_verifier_key(name, self.witness_key, type=COSIGNATURE_V1).text

    def start(self, other: Site) -> None:
        self.env = cairn_env(
            f"sqlite:///{self.folder / 'cairn.sqlite3'}",
            CAIRN_SITE_URL=self.url,
            CAIRN_SIGNING_KEY=_pem(self.site_key),
            CAIRN_WITNESS_SIGNING_KEY=_pem(self.witness_key),
            CAIRN_WITNESSED_LOGS=other.log_key,
            CAIRN_WITNESSES=f"{other.witness_vkey} {other.url}/api/witness",
        )
        self.manage("migrate", "--noinput")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cairn.serve", "--port", str(self.port)],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def ready(self) -> None:
        assert self.process is not None
        answering(self.url, self.process, seconds=30, log=lambda: self.name)

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    def sequence(self) -> None:
        """One pass of the sequencer job as a worker runs it: integrate, sign, ask the witness."""
        self.manage("shell", "-c", "from ledger.jobs import sequence_log; sequence_log()")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def two_sites(tmp_path):
    sites = []
    for name in ("north", "south"):
        folder = tmp_path / name
        folder.mkdir()
        sites.append(
            Site(
                name,
                folder,
                free_port(),
                Ed25519PrivateKey.generate(),
                Ed25519PrivateKey.generate(),
            )
        )
    north, south = sites
    north.start(south)
    south.start(north)
    yield north, south
    for site in sites:
        site.stop()


def _post_a_task(site: Site) -> None:
    token = httpx.post(f"{site.url}/api/agent/register", json={}).json()["token"]
    posted = httpx.post(
        f"{site.url}/api/a2a-tasks",
        json=open_task_payload(),
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": f"{site.name}-1"},
    )
    assert posted.status_code == 201, posted.text


def test_two_cairn_sites_witness_each_other(two_sites, tmp_path):
    north, south = two_sites
    north.ready()
    south.ready()
    for site in two_sites:
        _post_a_task(site)
        site.sequence()

    for site, other in ((north, south), (south, north)):
        note = httpx.get(f"{site.url}/api/log/checkpoint").text
        assert f"\u2014 127.0.0.1:{other.port}/cairn/witness " in note, note
        described = httpx.get(f"{other.url}/api/witness").json()
        assert described["logs"] == [f"127.0.0.1:{site.port}/cairn/log"]
        assert described["key"] == other.witness_vkey
        script = tmp_path / f"verify-{site.name}.py"
        script.write_text(httpx.get(f"{site.url}/verify/cairn_verify.py").text)
        checked = subprocess.run(
            [sys.executable, str(script), "log", "--full"],
            env={"CAIRN_HOME": str(tmp_path / f"home-{site.name}"), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert checked.returncode == 0, checked.stdout
        assert "pinned 1 witness(es), quorum 1, from the site's card" in checked.stdout
        assert "no witnesses are pinned" not in checked.stdout
