"""A site and its keypers as real Cairn processes (SPEC §15.8): each `python -m cairn.serve` with
its own SQLite database and keys, the keypers witnessing the site's log, so each keeps every
root it cosigned and releases against them by its own clock.

    keypers, site = keyper_site(3, threshold=2)   # the fixture: all started and answering
    site.sequence()                               # integrate, sign, have the keypers cosign
    site.releases_collect(contribution_id)        # `ledger.releases` inside the site's process
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from ledger.keyper_seal import Keyper, keyper_public
from ledger.signed_note import COSIGNATURE_V1, ED25519, private_verifier_key
from tests.deploy.postgres import free_port
from tests.deploy.processes import ROOT, answering, cairn_env


def pem(key: Ed25519PrivateKey | X25519PrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


@dataclass
class CairnProcess:
    """One Cairn: a folder for its database and log, a port, and its web process."""

    label: str
    folder: Path
    port: int = field(default_factory=free_port)
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.folder / "web.log"

    @property
    def database(self) -> Path:
        return self.folder / "cairn.sqlite3"

    def configure(self, **settings: str) -> None:
        self.env = cairn_env(
            f"sqlite:///{self.database}",
            CAIRN_SITE_URL=self.url,
            CAIRN_LOG_INTERVAL_S="1",
            **settings,
        )

    def serve(self) -> None:
        """Start (or restart) the web process; `ready` waits for it."""
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "cairn.serve", "--port", str(self.port)],
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def ready(self) -> None:
        """Wait for it to answer; four Cairns starting at once on a busy machine take a while."""
        assert self.process is not None
        answering(self.url, self.process, seconds=120, log=self.log.read_text)

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def shell(self, code: str, **env: str) -> str:
        """Run `code` in a `manage.py shell` of this Cairn (its settings, its database): what
        a worker of it would run. Returns what it printed."""
        done = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", code],
            cwd=ROOT,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout


@dataclass
class KeyperProcess(CairnProcess):
    """A Cairn that witnesses the site's log and is a keyper for it, under its witness name."""

    witness_key: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    keyper_key: X25519PrivateKey = field(default_factory=X25519PrivateKey.generate)

    @property
    def name(self) -> str:
        return f"{self.host}/cairn/witness"

    @property
    def witness_vkey(self) -> str:
        return private_verifier_key(self.name, self.witness_key, type=COSIGNATURE_V1).text

    @property
    def keyper(self) -> Keyper:
        """As the site lists it (`CAIRN_KEYPERS`)."""
        return Keyper(self.name, keyper_public(self.keyper_key), f"{self.url}/api/keyper")

    def configure_for(self, site: SiteProcess) -> None:
        self.configure(
            CAIRN_WITNESS_SIGNING_KEY=pem(self.witness_key),
            CAIRN_KEYPER_KEY=pem(self.keyper_key),
            CAIRN_WITNESSED_LOGS=site.log_key,
        )


@dataclass
class SiteProcess(CairnProcess):
    """The site whose contributors seal to the keypers, which are its witnesses too."""

    site_key: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)

    @property
    def origin(self) -> str:
        return f"{self.host}/cairn/log"

    @property
    def log_key(self) -> str:
        return private_verifier_key(self.origin, self.site_key, type=ED25519).text

    def configure_with(
        self, keypers: list[KeyperProcess], *, threshold: int, quorum: int, **settings: str
    ) -> None:
        self.configure(
            **self.keyper_settings(keypers, threshold=threshold, quorum=quorum), **settings
        )

    def keyper_settings(
        self, keypers: list[KeyperProcess], *, threshold: int, quorum: int
    ) -> dict[str, str]:
        """The site's key, its witnesses (the keypers) and its keypers, as its environment says
        them: for this process, or for any deployment that serves as this site."""
        return {
            "CAIRN_SIGNING_KEY": pem(self.site_key),
            "CAIRN_WITNESSES": "\n".join(f"{k.witness_vkey} {k.url}/api/witness" for k in keypers),
            "CAIRN_WITNESS_QUORUM": str(quorum),
            "CAIRN_KEYPERS": "\n".join(
                f"{k.keyper.name} {k.keyper.hpke_key} {k.keyper.url}" for k in keypers
            ),
            "CAIRN_KEYPER_THRESHOLD": str(threshold),
        }

    def sequence(self) -> None:
        """One run of the sequencer job as a worker runs it: integrate, sign, ask the witnesses
        (the keypers) to cosign."""
        self.shell("from ledger.jobs import sequence_log; sequence_log()")

    def releases_collect(
        self, contribution_id: str, *, kept: list[dict[str, Any]] | None = None
    ) -> list[dict[str, Any]]:
        """`ledger.releases.releases_collect` in the site's own process, on the contribution as
        stored, or with `kept` as the releases it holds (not saved)."""
        code = (
            "import json, os\n"
            "from ledger.releases import releases_collect\n"
            "from tasks.models import Contribution\n"
            "c = Contribution.objects.get(id=os.environ['COLLECT_ID'])\n"
            "if os.environ['COLLECT_KEPT'] != 'null':\n"
            "    c.releases = json.loads(os.environ['COLLECT_KEPT'])\n"
            "print('RELEASES ' + json.dumps(releases_collect(c)))\n"
        )
        printed = self.shell(code, COLLECT_ID=contribution_id, COLLECT_KEPT=json.dumps(kept))
        line = next(line for line in printed.splitlines() if line.startswith("RELEASES "))
        return json.loads(line.removeprefix("RELEASES "))

    def agent(self) -> dict[str, str]:
        """A fresh agent's Authorization header."""
        token = httpx.post(f"{self.url}/api/agent/register", json={}).json()["token"]
        return {"Authorization": f"Bearer {token}"}


def start_all(processes: list[CairnProcess], migrated: Path) -> None:
    """Give each its own copy of a migrated database, then serve and wait for every one."""
    for process in processes:
        shutil.copyfile(migrated, process.database)
    for process in processes:
        process.serve()
    for process in processes:
        process.ready()


KeyperSite = Callable[..., tuple[list[KeyperProcess], SiteProcess]]


@pytest.fixture
def keyper_site(tmp_path, migrated_sqlite) -> Iterator[KeyperSite]:
    """Make and start `count` keypers and a site that lists them, every keyper a witness of the
    site (quorum: all of them unless said), with `settings` for the site's environment."""
    made: list[CairnProcess] = []

    def make(
        count: int = 3, *, threshold: int = 2, quorum: int | None = None, **settings: str
    ) -> tuple[list[KeyperProcess], SiteProcess]:
        folders = [tmp_path / f"keyper-{n}" for n in range(1, count + 1)] + [tmp_path / "site"]
        for folder in folders:
            folder.mkdir()
        keypers = [KeyperProcess(f"keyper {n}", folder) for n, folder in enumerate(folders[:-1], 1)]
        site = SiteProcess("site", folders[-1])
        site.configure_with(
            keypers, threshold=threshold, quorum=count if quorum is None else quorum, **settings
        )
        for keyper in keypers:
            keyper.configure_for(site)
        made.extend([*keypers, site])
        start_all([*keypers, site], migrated_sqlite)
        return keypers, site

    yield make
    for process in made:
        process.stop()
