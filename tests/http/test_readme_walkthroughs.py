"""The README's walk-throughs, run as a reader runs them: the scripts copied out of README.md,
against the live server. Besides the happy path, what a reader meets on a second run: the
registration limit (HTTP 429) and a refusal, each said in one line, not a traceback."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.a2a.test_js_client import JS_DIR, node  # noqa: F401  (the Node.js fixture)

README = Path(__file__).resolve().parents[2] / "README.md"


def _script(language: str) -> str:
    """The first fenced `language` block of README.md."""
    return re.search(rf"```{language}\n(.*?)\n```", README.read_text(), flags=re.S).group(1)


def _run(command: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        command,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def python_walkthrough(tmp_path) -> Path:
    script = tmp_path / "cairn_walkthrough.py"
    script.write_text(_script("python"))
    return script


@pytest.fixture
def js_walkthrough(node) -> Path:  # noqa: F811
    """Beside tests/a2a/js's node_modules, so the script's imports resolve as after `npm install`."""
    script = JS_DIR / f"readme-walkthrough-{uuid.uuid4().hex}.mjs"
    script.write_text(_script("js"))
    yield script
    script.unlink()


@pytest.fixture
def registrations_used_up(http, settings) -> None:
    """This address (127.0.0.1) has registered as many agents this hour as it may."""
    settings.CAIRN_REGISTRATIONS_PER_IP_PER_HOUR = 1
    assert http.post("/api/agent/register", json={}).status_code == 201


def _assert_said_in_one_line(result: subprocess.CompletedProcess, *words: str) -> None:
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "    at " not in result.stderr, result.stderr
    said = result.stderr.strip().splitlines()
    assert len(said) == 1 and all(word in said[0] for word in words), result.stderr


def test_the_python_walkthrough_runs_as_printed(
    python_walkthrough, live_url, poster, short_deadlines
):
    result = _run(
        [sys.executable, str(python_walkthrough)],
        CAIRN_URL=live_url,
        CAIRN_TOKEN=poster.token,
        DEADLINE_S="8",
    )

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert re.fullmatch(r"posted \S+ TASK_STATE_WORKING", lines[0])
    assert [line.split()[0] for line in lines[1:3]] == ["sealed", "sealed"]
    assert lines[3] == "TASK_STATE_COMPLETED resolved source_supported"


def test_the_python_walkthrough_says_when_registration_is_limited(
    python_walkthrough, live_url, poster, short_deadlines, registrations_used_up
):
    result = _run(
        [sys.executable, str(python_walkthrough)],
        CAIRN_URL=live_url,
        CAIRN_TOKEN=poster.token,
        DEADLINE_S="60",
    )

    assert result.stdout.startswith("posted ")
    _assert_said_in_one_line(result, "not registered: HTTP 429 rate_limited", "retry in")


def test_the_python_walkthrough_says_what_a_refusal_was(
    python_walkthrough, live_url, poster, short_deadlines, settings
):
    settings.CAIRN_TASKS_PER_AGENT_PER_DAY = 0

    result = _run(
        [sys.executable, str(python_walkthrough)],
        CAIRN_URL=live_url,
        CAIRN_TOKEN=poster.token,
        DEADLINE_S="60",
    )

    _assert_said_in_one_line(result, "refused: daily_cap")


def test_the_js_walkthrough_says_when_registration_is_limited_or_refused(
    js_walkthrough,
    live_url,
    poster,
    short_deadlines,
    registrations_used_up,
    settings,
    node,  # noqa: F811
):
    env = {"CAIRN_URL": live_url, "CAIRN_TOKEN": poster.token, "DEADLINE_S": "60"}

    limited = _run([node, str(js_walkthrough)], **env)
    settings.CAIRN_TASKS_PER_AGENT_PER_DAY = 0
    refused = _run([node, str(js_walkthrough)], **env)

    assert limited.stdout.startswith("posted ")
    _assert_said_in_one_line(limited, "not registered: HTTP 429 rate_limited", "retry in")
    _assert_said_in_one_line(refused, "refused: daily_cap")
