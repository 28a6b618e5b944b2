"""The README's "Try it", as a newcomer follows it: `make run` as printed, on a port other than
8000, then a second shell that knows nothing but the `export` line `make run` printed runs the
section's block as printed: a token, a read, and the walk-through's post, contributions and
evaluation, on that one server, with nothing restarted."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy.postgres import free_port
from tests.deploy.processes import answering
from tests.docs import ROOT, doc_block, doc_text
from tests.ops.conftest import make_run_argv

EXPORT_LINE = re.compile(r"(?m)^\s*(export CAIRN_URL=\S+)$")


def _try_it() -> str:
    """The README's "Try it" section: its heading to the next one."""
    return doc_text("README.md").split("\n## Try it\n", 1)[1].split("\n## ", 1)[0]


@pytest.fixture
def clone(tmp_path) -> Path:
    """A clone as `make run` leaves it: this interpreter's virtualenv as its `.venv`, and the
    repository's docs."""
    folder = tmp_path / "clone"
    folder.mkdir()
    (folder / ".venv").symlink_to(sys.prefix)
    (folder / "docs").symlink_to(ROOT / "docs")
    return folder


@pytest.fixture
def make_run(tmp_path) -> Iterator[tuple[str, Path]]:
    """The README's `make run` (`make_run_argv`), on a free port, with a SQLite file and an empty
    settings file of its own and none of the settings the tests set (DEBUG, ALLOWED_HOSTS,
    CAIRN_...): what it printed, once it answers."""
    [command] = [
        line.split("#")[0].split()
        for line in doc_block("README.md", "make run    #").splitlines()
        if line.startswith("make run")
    ]
    assert command == ["make", "run"]
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
    port = free_port()
    argv = make_run_argv(port)
    log = tmp_path / "make-run.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        answering(f"http://127.0.0.1:{port}", process, seconds=60, log=log.read_text)
        give_up = time.monotonic() + 30
        while "ready for work" not in log.read_text() and time.monotonic() < give_up:
            time.sleep(0.2)
        yield log.read_text(), log
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def test_try_it_follows_the_first_lines_and_is_short():
    readme = doc_text("README.md")
    assert readme.startswith("# Cairn\n\n```sh\nmake run    #")
    assert doc_block("README.md", "make run    #").splitlines()[1].startswith("make test   #")
    headings = re.findall(r"^## (.+)$", re.sub(r"(?ms)^```.*?^```$", "", readme), flags=re.M)
    assert headings[0] == "Try it"
    assert len(f"## Try it\n{_try_it()}".strip().splitlines()) <= 15


def test_try_it_runs_as_printed_from_a_second_shell_with_only_the_export_line(make_run, clone):
    printed, log = make_run
    # The line `make run` printed for its own port, the only thing the second shell is given
    [export] = EXPORT_LINE.findall(printed)
    assert not export.endswith(":8000")
    block = doc_block("README.md", "docs/cairn_walkthrough.py")
    assert block in _try_it()

    second_shell = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", f"{export}\n{block}"],
        cwd=clone,
        env={"PATH": os.environ["PATH"], "HOME": str(clone.parent), "LANG": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert second_shell.returncode == 0, second_shell.stdout + second_shell.stderr
    # A token, once; a read, without one; then the walk-through's lines, on one line each
    decoder, said = json.JSONDecoder(), second_shell.stdout
    token, at = decoder.raw_decode(said)
    assert token["token"].startswith("cairn_") and token["token_type"] == "Bearer"
    listed, at = decoder.raw_decode(said := said[at:].lstrip())
    assert listed["tasks"] == []
    walked = said[at:].strip().splitlines()
    assert re.fullmatch(r"posted \S+ TASK_STATE_WORKING", walked[0]), second_shell.stdout
    assert [line.split()[0] for line in walked[1:3]] == ["sealed", "sealed"]
    assert walked[3] == "TASK_STATE_COMPLETED resolved source_supported", log.read_text()
    assert len(list((clone / "receipts").glob("*.json"))) == 2
