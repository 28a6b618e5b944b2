"""`make run` with two keypers on this machine (SPEC §15.8): `python -m cairn.local_keypers -- make run`.

Two more Cairns, each with its own database and keys, run beside the site as it would list them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from cairn.env import created_once, private_pem
from cairn.startup import load_settings
from ledger.keyper_seal import keyper_public
from ledger.signed_note import COSIGNATURE_V1, private_verifier_key

ROOT = Path(__file__).resolve().parent.parent
KEYPERS = 2
START_S = 120
STOP_S = 20
# Set by SIGINT or SIGTERM: the wait loops end, and everything is stopped in order.
STOP_ASKED = threading.Event()


@dataclass(frozen=True)
class LocalKeyper:
    number: int
    folder: Path
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def name(self) -> str:
        """Its witness name, as it makes it from its own `CAIRN_SITE_URL`."""
        return f"127.0.0.1:{self.port}/cairn/witness"

    @property
    def log(self) -> Path:
        return self.folder / "web.log"

    def keys(self) -> tuple[Ed25519PrivateKey, X25519PrivateKey]:
        """Its keys, made once and kept, so a keyper keeps its name's keys."""
        witness_pem = created_once(
            self.folder / "witness_key.pem", lambda: private_pem(Ed25519PrivateKey.generate())
        )
        keyper_pem = created_once(
            self.folder / "keyper_key.pem", lambda: private_pem(X25519PrivateKey.generate())
        )
        created_once(
            self.folder / "signing_key.pem", lambda: private_pem(Ed25519PrivateKey.generate())
        )
        created_once(self.folder / "seal_key", lambda: os.urandom(32).hex())
        witness = serialization.load_pem_private_key(witness_pem.encode(), password=None)
        keyper = serialization.load_pem_private_key(keyper_pem.encode(), password=None)
        assert isinstance(witness, Ed25519PrivateKey) and isinstance(keyper, X25519PrivateKey)
        return witness, keyper

    def environment(self, site_log_key: str) -> dict[str, str]:
        """Its own settings only: none of the site's (`.env` and `CAIRN_*` are left out)."""
        kept = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith(("CAIRN_", "DATABASE_", "DJANGO_"))
        }
        return {
            **kept,
            "CAIRN_ENV_FILE": os.devnull,
            "DEBUG": "true",
            "DATABASE_URL": f"sqlite:///{self.folder / 'cairn.sqlite3'}",
            "CAIRN_SITE_URL": self.url,
            "CAIRN_SIGNING_KEY": str(self.folder / "signing_key.pem"),
            "CAIRN_SEAL_KEY": str(self.folder / "seal_key"),
            "CAIRN_WITNESS_SIGNING_KEY": str(self.folder / "witness_key.pem"),
            "CAIRN_KEYPER_KEY": str(self.folder / "keyper_key.pem"),
            "CAIRN_WITNESSED_LOGS": site_log_key,
            "CAIRN_GRPC_BIND": "",
        }


def _answering(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/api/keyper", timeout=2) as answer:
            return answer.status == 200
    except OSError:  # URLError is one
        return False


def _stop(process: subprocess.Popen, *, group: bool = False) -> None:
    with contextlib.suppress(ProcessLookupError):
        if group:  # the rest of its group too, should its leader have ended first
            os.killpg(process.pid, signal.SIGTERM)
        elif process.poll() is None:
            process.terminate()
    try:
        process.wait(timeout=STOP_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _site_environment(keypers: list[LocalKeyper]) -> dict[str, str]:
    """What the site adds to its environment to list the keypers, each a witness of its log."""
    witnesses, listed = [], []
    for keyper in keypers:
        witness_key, hpke_key = keyper.keys()
        witness = private_verifier_key(keyper.name, witness_key, type=COSIGNATURE_V1).text
        witnesses.append(f"{witness} {keyper.url}/api/witness")
        listed.append(f"{keyper.name} {keyper_public(hpke_key)} {keyper.url}/api/keyper")
    return {"CAIRN_WITNESSES": "\n".join(witnesses), "CAIRN_KEYPERS": "\n".join(listed)}


def _keyper_started(keyper: LocalKeyper, site_log_key: str) -> subprocess.Popen:
    env = keyper.environment(site_log_key)
    command = [sys.executable, "manage.py", "migrate", "--noinput"]
    migrated = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if migrated.returncode != 0:
        sys.exit(f"keyper {keyper.number}: migrate failed\n{migrated.stderr}")
    serve = [sys.executable, "-m", "cairn.serve", "--host", "127.0.0.1", "--port", str(keyper.port)]
    with open(keyper.log, "ab") as out:
        return subprocess.Popen(serve, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def _serve(keypers: list[LocalKeyper], site_log_key: str, command: list[str]) -> int:
    """Start the keypers, wait for them, then run `command` as the site; return when one of them
    ends (its status, or 1 for a keyper) or a stop is asked (0), having stopped them all."""
    running: list[tuple[str, subprocess.Popen]] = []
    site_env = {**os.environ, **_site_environment(keypers)}
    try:
        for keyper in keypers:
            running.append((f"keyper {keyper.number}", _keyper_started(keyper, site_log_key)))
        give_up = time.monotonic() + START_S
        for keyper, (label, process) in zip(keypers, running, strict=True):
            while not _answering(keyper.url):
                if STOP_ASKED.is_set():
                    return 0
                if process.poll() is not None or time.monotonic() > give_up:
                    print(f"{label} did not start: see {keyper.log}", file=sys.stderr)
                    return 1
                time.sleep(0.2)
            print(f"Keyper {keyper.number}: {keyper.url}/api/keyper (log: {keyper.log})")
        print(
            f"The site lists these {len(keypers)} keypers, each a witness of its log; both must "
            "release a share to open a sealed report. They run here, with the keeper's keys: "
            "they show the flow and protect nothing."
        )
        site = subprocess.Popen(command, env=site_env, process_group=0)
        running.append(("the site", site))
        while not STOP_ASKED.is_set():
            ended = [label for label, process in running if process.poll() is not None]
            if ended == ["the site"]:
                return site.returncode
            if ended:
                print(f"{ended[0]} ended: stopping the rest", file=sys.stderr)
                return 1
            time.sleep(0.2)
        return 0
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for label, process in reversed(running):
            _stop(process, group=label == "the site")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=ROOT / "var" / "keypers")
    parser.add_argument(
        "--ports",
        default="",
        help="the keypers' ports, comma-separated (default: the site's port + 10 and + 11)",
    )
    parser.add_argument("--port", type=int, default=8000, help="the site's port")
    parser.add_argument("command", nargs="+", help="the site's command, e.g. make run")
    args = parser.parse_args()
    ports = [int(port) for port in args.ports.split(",")] if args.ports else []
    ports = ports or [args.port + 10 + n for n in range(KEYPERS)]
    if len(ports) != KEYPERS:
        parser.error(f"--ports takes {KEYPERS} ports")
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda signum, frame: STOP_ASKED.set())

    # The site's log key as the site makes it: its settings, with make run's DEBUG default.
    os.environ.setdefault("DEBUG", "true")
    load_settings()
    from ledger.notes import log_verifier_key

    folder = args.folder.resolve()
    keypers = [LocalKeyper(n, folder / str(n), port) for n, port in enumerate(ports, 1)]
    return _serve(keypers, log_verifier_key().text, args.command)


if __name__ == "__main__":
    sys.exit(main())
