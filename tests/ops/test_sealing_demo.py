"""docs/sealing.md as a newcomer follows it: `make run-keypers` as printed, on ports other than the
defaults, then a second shell that knows nothing but the `export` line it printed runs the page's
blocks one after the other: a task, two reports sealed by the verifier and sent through the A2A
SDK, the keypers' releases after the deadline, the opening, and the verifier's verdict."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.deploy.postgres import free_port
from tests.deploy.processes import answering
from tests.docs import ROOT, doc_block, doc_text
from tests.ops.conftest import make_run_argv
from tests.ops.test_try_it import EXPORT_LINE

PAGE = "docs/sealing.md"
# This interpreter's folder holds python3 and uv, as a reader's PATH does after the set-up.
TOOLS = str(Path(sys.executable).parent)


@dataclass
class RunKeypers:
    """`make run-keypers` running: its process (a session of its own), its output, the keypers'
    ports."""

    process: subprocess.Popen
    log: Path
    keyper_ports: list[int]

    @property
    def printed(self) -> str:
        return self.log.read_text()

    def keyper_pid(self, number: int) -> int:
        port = self.keyper_ports[number - 1]
        [line] = [
            line for line in _session(self.process.pid).splitlines() if f"--port {port}" in line
        ]
        return int(line.split()[0])


@pytest.fixture
def run_keypers(tmp_path) -> Iterator[RunKeypers]:
    """The page's `make run-keypers` with the settings a clone has (none of the tests'), its own
    SQLite file and keypers' folder, on free ports, once the site's worker is ready."""
    [command] = doc_block(PAGE, "make run-keypers").splitlines()
    assert command == "make run-keypers"
    settings_file = tmp_path / "cairn.env"
    settings_file.write_text("")
    env = {
        **{
            name: value
            for name, value in os.environ.items()
            if not name.startswith(
                ("CAIRN_", "DATABASE_URL", "DEBUG", "SECRET_KEY", "ALLOWED_HOSTS")
            )
        },
        "PYTHONUNBUFFERED": "1",
        "CAIRN_ENV_FILE": str(settings_file),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'cairn.sqlite3'}",
        "CAIRN_SIGNING_KEY": os.environ["CAIRN_SIGNING_KEY"],
        "CAIRN_SEAL_KEY": os.environ["CAIRN_SEAL_KEY"],
        "CAIRN_GRPC_BIND": f"127.0.0.1:{free_port()}",
    }
    port, keyper_ports = free_port(), [free_port(), free_port()]
    *make, target = make_run_argv(port)
    assert target == "run"
    argv = [
        *make,
        f"KEYPER_PORTS={keyper_ports[0]},{keyper_ports[1]}",
        f"KEYPERS_DIR={tmp_path / 'keypers'}",
        "run-keypers",
    ]
    log = tmp_path / "make-run-keypers.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        answering(f"http://127.0.0.1:{port}", process, seconds=180, log=log.read_text)
        give_up = time.monotonic() + 30
        while "ready for work" not in log.read_text() and time.monotonic() < give_up:
            time.sleep(0.2)
        yield RunKeypers(process, log, keyper_ports)
    finally:
        with contextlib.suppress(ProcessLookupError):  # it may have stopped by itself
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        # Every process it started, the keypers and the site's three included, stops in turn
        give_up = time.monotonic() + 60
        while (left := _session(process.pid)) and time.monotonic() < give_up:
            time.sleep(0.5)
        for line in left.splitlines():  # not left running after a failure
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(line.split()[0]), signal.SIGKILL)
        assert left == "", f"still running after the stop:\n{left}"


def _session(session: int) -> str:
    """The processes still running in the session, one a line."""
    listed = subprocess.run(
        ["ps", "-ww", "-s", str(session), "-o", "pid=,args="], capture_output=True
    )
    return listed.stdout.decode().strip()


@pytest.fixture
def clone(tmp_path) -> Path:
    """A clone as `make run` leaves it: this interpreter's virtualenv as its `.venv`, and the
    repository's docs."""
    folder = tmp_path / "clone"
    folder.mkdir()
    (folder / ".venv").symlink_to(sys.prefix)
    (folder / "docs").symlink_to(ROOT / "docs")
    return folder


def test_a_sealed_report_goes_from_the_seal_to_the_verifiers_verdict_as_printed(run_keypers, clone):
    printed, keyper_ports = run_keypers.printed, run_keypers.keyper_ports
    # The line `make run-keypers` printed for its site, the only thing the second shell is given
    [export] = EXPORT_LINE.findall(printed)
    assert "protect nothing" in printed and "protect nothing" in doc_text(PAGE)
    blocks = [
        doc_block(PAGE, "export CAIRN_HOME"),
        doc_block(PAGE, 'cairn_verify.py" seal'),
        doc_block(PAGE, "cairn_sealed.py opened"),
        doc_block(PAGE, 'cairn_verify.py" task'),
    ]
    page = doc_text(PAGE)
    assert sorted(blocks, key=page.index) == blocks

    second_shell = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", "\n".join([export, *blocks])],
        cwd=clone,
        env={
            **{name: value for name, value in os.environ.items() if not name.startswith("CAIRN_")},
            "PATH": f"{TOOLS}:{os.environ['PATH']}",
            "HOME": str(clone.parent),
        },
        capture_output=True,
        text=True,
        timeout=600,
    )

    said = second_shell.stdout + second_shell.stderr
    assert second_shell.returncode == 0, said
    lines = second_shell.stdout.splitlines()
    # Two receipts for reports sealed to the keypers, each kept for the verifier
    sealed = [line for line in lines if line.startswith("sealed to the keypers sha256:")]
    assert len(sealed) == 2, said
    assert len(list((clone / "receipts").glob("*.json"))) == 2
    # Each report released by both keypers, by their own names, then opened
    names = [f"127.0.0.1:{port}/cairn/witness" for port in keyper_ports]
    released = [line.split()[1:4] for line in lines if line.startswith("released ")]
    assert released == [[names[0], "share", "1"], [names[1], "share", "2"]] * 2, said
    opened = [line for line in lines if line.startswith("opened ")]
    assert [line.split()[-1] for line in opened] == ["source_supported"] * 2, said
    assert "TASK_STATE_COMPLETED resolved source_supported" in lines
    # And the verifier, redoing each opening from the published releases, verifies the task
    assert len(re.findall(r"(?m)^ok +keyper-sealed contribution .* signed releases", said)) == 2
    assert lines[-1] == "verified", said


def test_when_a_keyper_ends_the_site_and_the_other_keyper_stop_saying_which(run_keypers):
    # When the first keyper's process ends
    os.kill(run_keypers.keyper_pid(1), signal.SIGKILL)

    # Then make run-keypers stops, failing, and says which ended (the fixture then finds every
    # process it started stopped)
    assert run_keypers.process.wait(timeout=60) != 0
    assert "keyper 1 ended: stopping the rest" in run_keypers.printed
