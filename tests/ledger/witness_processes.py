"""Witnesses as real processes for the tests: the spec witness of `spec_witness.py`, written from
the C2SP texts alone, each with its own key and state file."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from ledger.notes import log_verifier_key

SPEC_WITNESS = Path(__file__).with_name("spec_witness.py")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class WitnessProcess:
    """One spec witness, a separate `python` process with its own key and state file."""

    name: str
    state: Path
    port: int = field(default_factory=_free_port)
    seed: str = field(default_factory=lambda: os.urandom(32).hex())
    key: str = ""
    process: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def configured(self) -> dict[str, str]:
        return {"name": self.name, "key": self.key, "url": self.url}

    def start(self, *, stall: float = 0.0, origins: tuple[str, ...] = ()) -> WitnessProcess:
        """Start it following the site's log 0 and the logs `origins` names."""
        command = [sys.executable, str(SPEC_WITNESS), "--name", self.name, "--seed", self.seed]
        for key in [log_verifier_key(), *map(log_verifier_key, origins)]:
            command += ["--log-key", key.text]
        command += ["--state", str(self.state)]
        command += ["--port", str(self.port), "--stall", str(stall)]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        port, self.key = self.process.stdout.readline().split()
        assert int(port) == self.port
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def submit(self, body: str) -> httpx.Response:
        return httpx.post(f"{self.url}/add-checkpoint", content=body.encode(), timeout=10)

    def cosigned_size(self, origin: str = "localhost/cairn/log") -> int:
        logs = json.loads(self.state.read_text()) if self.state.exists() else {}
        return int(logs.get(origin, {"size": 0})["size"])


@pytest.fixture
def witness_processes(tmp_path) -> Iterator[Callable[[int], list[WitnessProcess]]]:
    made: list[WitnessProcess] = []

    def make(count: int) -> list[WitnessProcess]:
        for n in range(len(made) + 1, len(made) + count + 1):
            made.append(WitnessProcess(f"witness.test/w{n}", tmp_path / f"w{n}.json"))
        return made[-count:]

    yield make
    for witness in made:
        witness.stop()


@pytest.fixture
def witnessed(settings, witness_processes) -> Callable[..., list[WitnessProcess]]:
    """Start three spec witnesses and configure them, quorum 2, as the environment would."""

    def configure(*, stall: dict[int, float] | None = None, down: tuple[int, ...] = ()):
        witnesses = witness_processes(3)
        for n, witness in enumerate(witnesses):
            if n in down:  # its key is known, nothing listens at its URL yet
                witness.start().stop()
            else:
                witness.start(stall=(stall or {}).get(n, 0.0))
        settings.CAIRN_WITNESSES = [w.configured for w in witnesses]
        settings.CAIRN_WITNESS_QUORUM = 2
        settings.CAIRN_LOG_INTERVAL_S = 0
        return witnesses

    return configure
