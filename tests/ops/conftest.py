"""A Cairn served as `make run` serves it, in its own process, for the tests of operations."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.deploy.postgres import free_port

ROOT = Path(__file__).resolve().parents[2]


def make_run_argv(port: int) -> list[str]:
    """`make run` on `port`, as a developer starts it, on the virtualenv running these tests: `-o`
    keeps make from reinstalling it (or writing the clone's `.env`) when pyproject.toml is
    newer."""
    venv = sys.prefix
    return [
        "make",
        "--no-print-directory",
        f"VENV={venv}",
        "-o",
        f"{venv}/.installed",
        "-o",
        ".env",
        f"PORT={port}",
        "run",
    ]


@pytest.fixture
def served_process(tmp_path, migrated_sqlite) -> Iterator[tuple[str, Path, subprocess.Popen]]:
    """`python -m cairn.serve` in its own process, on a copy of the migrated database, logging
    JSON to a file: its URL, its log and the process."""
    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith("CAIRN_") and k != "DATABASE_URL"
        },
        "DEBUG": "true",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'cairn.sqlite3'}",
        "CAIRN_LOG_FORMAT": "json",
        "CAIRN_SIGNING_KEY": os.environ["CAIRN_SIGNING_KEY"],
        "CAIRN_SEAL_KEY": os.environ["CAIRN_SEAL_KEY"],
    }
    shutil.copyfile(migrated_sqlite, tmp_path / "cairn.sqlite3")
    port = free_port()
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "cairn.serve", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    give_up = time.monotonic() + 120  # a start takes long on a busy machine (xdist's workers)
    try:
        while True:
            try:
                httpx.get(f"{url}/healthz", timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < give_up, log.read_text()
                time.sleep(0.2)
        yield url, log, server
    finally:  # a server that never answered is stopped too, not left serving after the run
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=10)


@pytest.fixture
def served(served_process) -> tuple[str, Path]:
    """Cairn as `make run` serves it: its URL and its log."""
    url, log, _ = served_process
    return url, log
