"""The walk-throughs and commands of the README and docs/, run as a reader runs them: the scripts
and shell blocks copied out of the pages, against the live server on a port other than 8000, with the
address only in `CAIRN_URL`. Besides the happy path, what a reader meets on a second run: the
registration limit (HTTP 429) and a refusal, each said in one line, not a traceback."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters

from core.canonical import canonical_digest
from ledger.services import log_sequence
from tests.a2a.conftest import JS_DIR, node  # noqa: F401  (the Node.js fixture)
from tests.deploy.postgres import free_port
from tests.docs import ROOT, doc_block, doc_blocks, doc_text, pages
from tests.factories import contribution_report
from tests.mcp.conftest import Answer, call

# This interpreter's folder holds python3 and uv, as a reader's PATH does after the set-up.
TOOLS = str(Path(sys.executable).parent)
WALKTHROUGH = "docs/walkthrough.md"


def _run(command: list[str], cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        command,
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _bash(commands: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """Commands as printed, in bash, stopping at the first that fails."""
    env = {"PATH": f"{TOOLS}:{os.environ['PATH']}", **env}
    return _run(["bash", "-euo", "pipefail", "-c", commands], cwd=cwd, **env)


@pytest.fixture
def python_walkthrough(tmp_path) -> Path:
    script = tmp_path / "cairn_walkthrough.py"
    script.write_text(doc_block(WALKTHROUGH, "asyncio.run(main())", "python"))
    return script


@pytest.fixture
def js_walkthrough(node) -> Path:  # noqa: F811
    """Beside tests/a2a/js's node_modules, so the script's imports resolve as after `npm install`."""
    script = JS_DIR / f"readme-walkthrough-{uuid.uuid4().hex}.mjs"
    script.write_text(doc_block(WALKTHROUGH, "ClientFactory", "js"))
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


def test_no_page_sets_the_address_every_command_reads_the_one_make_run_printed():
    """The one place that sets `CAIRN_URL` is the line `make run` prints with its own port
    (tests/ops/test_try_it.py runs it): a line in a page would guess the port, and in a second
    terminal, where `PORT` is unset, guess 8000."""
    blocks = [block for page in pages() for block in doc_blocks(page)]
    setters = [line for block in blocks for line in block.splitlines() if "CAIRN_URL=" in line]
    assert setters == []
    set_up = " ".join(
        doc_text("README.md").split("\n## Set-up\n", 1)[1].split("\n## ", 1)[0].split()
    )
    assert "by copying the `export CAIRN_URL=…` line `make run` printed" in set_up
    commands = [re.sub(r"\s#.*", "", line) for block in blocks for line in block.splitlines()]
    assert [line for line in commands if "127.0.0.1:8000" in line] == []


def test_the_python_walkthrough_runs_as_printed_twice_a_day_and_its_receipts_verify(
    python_walkthrough, live_url, short_deadlines, settings, tmp_path
):
    # Given caps that the first run would use up if both runs shared an agent
    settings.CAIRN_TASKS_PER_AGENT_PER_DAY = settings.CAIRN_CONTRIBUTIONS_PER_AGENT_PER_DAY = 1

    # When a reader runs the walk-through twice, in its folder
    runs = [
        _run(
            [sys.executable, str(python_walkthrough)],
            cwd=tmp_path,
            CAIRN_URL=live_url,
            DEADLINE_S="6",
        )
        for _ in range(2)
    ]

    # Then each run posts, contributes twice and reads the evaluation
    for result in runs:
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert re.fullmatch(r"posted \S+ TASK_STATE_WORKING", lines[0])
        assert [line.split()[0] for line in lines[1:3]] == ["sealed", "sealed"]
        assert lines[3] == "TASK_STATE_COMPLETED resolved source_supported"
    receipts = sorted((tmp_path / "receipts").glob("*.json"))
    assert len(receipts) == 4

    # And the README's receipt check, run there with uv, accepts every receipt
    log_sequence()  # what the worker does within seconds
    command = _verifier_line("receipt")
    checked = _bash(command, tmp_path, CAIRN_URL=live_url, CAIRN_HOME=str(tmp_path / "home"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("the evaluation counts it with the same report digest") == 4


def _verifier_line(command: str) -> str:
    """The line of the verifier's block that runs `command` with uv."""
    block = doc_block("docs/verify.md", 'verify/cairn_verify.py" task')
    [line] = [
        line
        for line in block.splitlines()
        if line.startswith(("uv run", "for ")) and f'cairn_verify.py" {command}' in line
    ]
    return line


def test_the_verifier_runs_as_printed_with_uv_and_without(live_url, poster, post_task, tmp_path):
    # Given a task in the log
    task = post_task(poster)
    log_sequence()
    env = {"CAIRN_URL": live_url, "CAIRN_HOME": str(tmp_path / "home"), "HOME": str(tmp_path)}

    # When the README's verifier commands run as printed, with uv
    with_uv = [
        _bash(_verifier_line("task").replace("<task id or URL>", str(task.pk)), tmp_path, **env),
        _bash(_verifier_line("log"), tmp_path, **env),
        _bash(_verifier_line("monitor"), tmp_path, **env),
    ]
    # And the route without uv: a virtualenv of its own, the file fetched with curl
    without_uv = _bash(
        doc_block("docs/verify.md", "~/.cairn/venv/bin/python3 ~/.cairn/cairn_verify.py"),
        tmp_path,
        **env,
    )

    # Then each checks the site at CAIRN_URL and passes
    for result in [*with_uv, without_uv]:
        assert result.returncode == 0, result.stdout + result.stderr
    assert f"on {live_url}" in with_uv[0].stdout and "is in the log" in with_uv[0].stdout
    assert f'DEFAULT_CAIRN_URL = "{live_url}"' in (tmp_path / ".cairn/cairn_verify.py").read_text()


@pytest.fixture
def agents_cli(tmp_path) -> Path:
    """`claude` and `codex` stand-ins that write down what they were asked to add."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("claude", "codex"):
        tool = bin_dir / name
        tool.write_text(f'#!/bin/sh\necho "{name} $*" >> "$HOME/added"\n')
        tool.chmod(0o755)
    return bin_dir


def test_the_mcp_commands_run_as_printed(live_url, http, agents_cli, tmp_path):
    env = {"CAIRN_URL": live_url, "HOME": str(tmp_path), "PATH": f"{agents_cli}:/usr/bin:/bin"}

    local = _bash(
        doc_block("docs/mcp.md", 'cairn_mcp.py" -o ~/.cairn/cairn_mcp.py'), tmp_path, **env
    )
    hosted = _bash(doc_block("docs/mcp.md", "--transport http cairn-read"), tmp_path, **env)

    assert local.returncode == 0 and hosted.returncode == 0, local.stderr + hosted.stderr
    downloaded = (tmp_path / ".cairn" / "cairn_mcp.py").read_text()
    assert downloaded == http.get("/mcp/cairn_mcp.py").text and live_url in downloaded
    added = [shlex.split(line) for line in (tmp_path / "added").read_text().splitlines()]
    local_server = ["uv", "run", "--script", f"{tmp_path}/.cairn/cairn_mcp.py"]
    assert added == [
        ["claude", "mcp", "add", "-s", "user", "cairn", "--", *local_server],
        ["codex", "mcp", "add", "cairn", "--", *local_server],
        [
            "claude",
            "mcp",
            "add",
            "-s",
            "user",
            "--transport",
            "http",
            "cairn-read",
            f"{live_url}/api/mcp",
        ],
    ]


def test_the_python_walkthrough_says_when_registration_is_limited(
    python_walkthrough, live_url, short_deadlines, registrations_used_up, tmp_path
):
    result = _run(
        [sys.executable, str(python_walkthrough)],
        cwd=tmp_path,
        CAIRN_URL=live_url,
        DEADLINE_S="60",
    )

    assert result.stdout == ""
    _assert_said_in_one_line(result, "not registered: HTTP 429 rate_limited", "retry in")


def test_both_walkthroughs_ask_whether_cairn_is_running_when_nothing_answers(
    python_walkthrough, js_walkthrough, tmp_path
):
    nowhere = f"http://127.0.0.1:{free_port()}"
    for command in ([sys.executable, str(python_walkthrough)], ["node", str(js_walkthrough)]):
        result = _run(command, cwd=tmp_path, CAIRN_URL=nowhere, DEADLINE_S="60")
        assert result.stdout == ""
        _assert_said_in_one_line(result, f"is Cairn running at {nowhere}?")


def test_the_python_walkthrough_says_what_a_refusal_was(
    python_walkthrough, live_url, short_deadlines, settings, tmp_path
):
    settings.CAIRN_TASKS_PER_AGENT_PER_DAY = 0

    result = _run(
        [sys.executable, str(python_walkthrough)],
        cwd=tmp_path,
        CAIRN_URL=live_url,
        DEADLINE_S="60",
    )

    _assert_said_in_one_line(result, "refused: daily_cap")


def test_the_js_walkthrough_verifies_the_card_and_runs_as_printed_twice_a_day(
    js_walkthrough,
    live_url,
    short_deadlines,
    settings,
    tmp_path,
    node,  # noqa: F811
):
    settings.CAIRN_TASKS_PER_AGENT_PER_DAY = settings.CAIRN_CONTRIBUTIONS_PER_AGENT_PER_DAY = 1
    env = {"CAIRN_URL": live_url, "DEADLINE_S": "6"}

    runs = [_run([node, str(js_walkthrough)], cwd=tmp_path, **env) for _ in range(2)]

    for result in runs:
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines[0] == "card signature verified"
        assert re.fullmatch(r"posted \S+ TASK_STATE_WORKING", lines[1])
        assert [line.split()[0] for line in lines[2:4]] == ["sealed", "sealed"]
        assert lines[4].startswith("TASK_STATE_COMPLETED contested")
    receipts = sorted((tmp_path / "receipts").glob("*.json"))
    assert len(receipts) == 4
    assert all("signature" in json.loads(path.read_text()) for path in receipts)


def test_the_js_walkthrough_says_when_registration_is_limited_or_refused(
    js_walkthrough,
    live_url,
    short_deadlines,
    registrations_used_up,
    settings,
    tmp_path,
    node,  # noqa: F811
):
    env = {"CAIRN_URL": live_url, "DEADLINE_S": "60"}

    limited = _run([node, str(js_walkthrough)], cwd=tmp_path, **env)
    settings.CAIRN_REGISTRATIONS_PER_IP_PER_HOUR = 20
    settings.CAIRN_TASKS_PER_AGENT_PER_DAY = 0
    refused = _run([node, str(js_walkthrough)], cwd=tmp_path, **env)

    assert limited.stdout == "card signature verified\n"
    _assert_said_in_one_line(limited, "not registered: HTTP 429 rate_limited", "retry in")
    _assert_said_in_one_line(refused, "refused: daily_cap")


def test_the_uv_route_works_without_pipx_as_printed(tmp_path):
    # Given a shell with Python but neither pipx nor uv on its PATH
    python_only = f"{Path(sys.base_prefix) / 'bin'}:/usr/bin:/bin"
    block = doc_block("README.md", "~/.cairn/uv/bin/pip install")

    # When a reader runs the README's block, then asks for uv as the next sections do
    done = _run(
        ["bash", "-euo", "pipefail", "-c", f"{block}\ncommand -v uv\nuv --version"],
        cwd=tmp_path,
        HOME=str(tmp_path),
        PATH=python_only,
    )

    # Then uv is the one it installed, and it runs
    assert done.returncode == 0, done.stderr
    found, version = done.stdout.splitlines()[-2:]
    assert found == f"{tmp_path}/.cairn/uv/bin/uv"
    assert version.startswith("uv ")


def test_the_printed_python_walkthrough_is_the_one_try_it_runs():
    printed = doc_block(WALKTHROUGH, "asyncio.run(main())", "python")
    assert printed + "\n" == (ROOT / "docs" / "cairn_walkthrough.py").read_text()


def _reader_home(tmp_path: Path) -> dict[str, str]:
    """A reader's own home folder, with this machine's pip and npm settings and caches (where the
    package index is), so that the pages' `~/…` folders land in the test's folder."""
    home = Path.home()
    tools = {
        "PIP_CONFIG_FILE": home / ".config" / "pip" / "pip.conf",
        "PIP_CACHE_DIR": home / ".cache" / "pip",
        "NPM_CONFIG_USERCONFIG": home / ".npmrc",
        "npm_config_cache": home / ".npm",
    }
    return {
        "HOME": str(tmp_path),
        **{name: str(path) for name, path in tools.items() if path.exists()},
    }


def test_the_walkthroughs_folders_do_not_nest_when_made_in_order_in_one_terminal(tmp_path):
    clone = tmp_path / "clone"
    clone.mkdir()
    folders = [
        next(
            line for line in doc_block(WALKTHROUGH, marker).splitlines() if line.startswith("mkdir")
        )
        for marker in ('pip install "a2a-sdk==1.3.0"', "npm install @a2a-js/sdk@1.3.0")
    ]

    said = _bash("\n".join(f"{line} && pwd" for line in folders), clone, HOME=str(tmp_path))

    assert said.returncode == 0, said.stderr
    assert said.stdout.splitlines() == [
        str(tmp_path / "cairn-walkthrough" / "py"),
        str(tmp_path / "cairn-walkthrough" / "js"),
    ]


def _in_order(set_up: str, script: str, run: str, saved_as: str) -> str:
    """A walk-through's three blocks as one shell script, in the order printed, with the reader's
    saving of the script in its place: after the block that makes the folder, before the run."""
    text = doc_text(WALKTHROUGH)
    assert text.index(set_up) < text.index(script) < text.index(run)
    told = text[text.index(set_up) : text.index(script)]
    assert f"Save the block below in that folder as `{saved_as}`" in told
    return "\n".join([set_up, f"cat > {saved_as} <<'SAVED'\n{script}\nSAVED", run])


def _after(said: str, first_word: str) -> list[str]:
    """The script's own lines: what it printed from the first line starting with `first_word`,
    after pip's or npm's."""
    lines = said.splitlines()
    return lines[[line.split(" ")[0] for line in lines].index(first_word) :]


def test_the_python_walkthrough_runs_block_by_block_in_the_order_printed(
    live_url, settings, tmp_path
):
    # Given the server's minimum deadline as `make run` sets it
    settings.CAIRN_TASK_DEADLINE_MIN_S = 30
    commands = _in_order(
        doc_block(WALKTHROUGH, 'pip install "a2a-sdk==1.3.0" rfc8785'),
        doc_block(WALKTHROUGH, "asyncio.run(main())", "python"),
        doc_block(WALKTHROUGH, "python3 cairn_walkthrough.py"),
        "cairn_walkthrough.py",
    )

    # When a reader runs the page's blocks one after the other, in one shell
    result = _bash(commands, tmp_path, CAIRN_URL=live_url, **_reader_home(tmp_path))

    # Then the walk-through posts, contributes and reads the evaluation, on this one server
    assert result.returncode == 0, result.stdout + result.stderr
    lines = _after(result.stdout, "posted")
    assert re.fullmatch(r"posted \S+ TASK_STATE_WORKING", lines[0]), result.stdout
    assert lines[3] == "TASK_STATE_COMPLETED resolved source_supported", result.stdout
    assert len(list((tmp_path / "cairn-walkthrough/py/receipts").glob("*.json"))) == 2


def test_the_js_walkthrough_runs_block_by_block_in_the_order_printed(
    live_url,
    settings,
    tmp_path,
    node,  # noqa: F811
):
    settings.CAIRN_TASK_DEADLINE_MIN_S = 30
    commands = _in_order(
        doc_block(WALKTHROUGH, "npm install @a2a-js/sdk@1.3.0"),
        doc_block(WALKTHROUGH, "ClientFactory", "js"),
        doc_block(WALKTHROUGH, "node cairn_walkthrough.mjs"),
        "cairn_walkthrough.mjs",
    )

    result = _bash(
        commands,
        tmp_path,
        CAIRN_URL=live_url,
        PATH=f"{Path(node).parent}:{os.environ['PATH']}",
        **_reader_home(tmp_path),
    )

    assert result.returncode == 0, result.stdout + result.stderr
    lines = _after(result.stdout, "card")
    assert lines[0] == "card signature verified", result.stdout
    assert re.fullmatch(r"posted \S+ TASK_STATE_WORKING", lines[1]), result.stdout
    assert lines[4].startswith("TASK_STATE_COMPLETED contested"), result.stdout
    assert len(list((tmp_path / "cairn-walkthrough/js/receipts").glob("*.json"))) == 2


def test_the_json_rpc_call_with_curl_runs_as_printed(live_url, poster, post_task, tmp_path):
    task = post_task(poster)

    listed = _bash(
        doc_block("docs/bindings.md", '"method":"ListTasks"'), tmp_path, CAIRN_URL=live_url
    )

    assert listed.returncode == 0, listed.stderr
    result = json.loads(listed.stdout)["result"]
    assert [found["id"] for found in result["tasks"]] == [str(task.pk)]


def test_a_verifier_built_from_the_repository_differs_from_the_served_one_only_in_its_url(
    live_url, poster, post_task, tmp_path
):
    post_task(poster)
    log_sequence()
    block = doc_block("docs/verify.md", "python3 -m core.amalgam verify/cairn_verify.py >")
    build, compare, run = block.splitlines()
    env = {"CAIRN_URL": live_url, "CAIRN_HOME": str(tmp_path / "home"), "HOME": str(tmp_path)}

    built = _bash(build, ROOT, **env)
    # diff exits 1 when the files differ, as they do in the one line the block names
    compared = _run(["bash", "-c", compare], cwd=ROOT, **env)
    monitor = _bash(run, ROOT, **env)

    assert built.returncode == 0, built.stderr
    changed = [line for line in compared.stdout.splitlines() if line[:1] in "<>"]
    assert compared.returncode == 1 and len(changed) == 2, compared.stdout + compared.stderr
    assert all("DEFAULT_CAIRN_URL = " in line for line in changed), changed
    assert monitor.returncode == 0, monitor.stdout + monitor.stderr


def test_any_mcp_clients_configuration_starts_the_server_for_consent_preview_contribute(
    live_url, agents_cli, poster, post_task, tmp_path
):
    # Given the local server downloaded as printed, and an open task
    env = {
        "CAIRN_URL": live_url,
        "HOME": str(tmp_path),
        "PATH": f"{agents_cli}:{TOOLS}:/usr/bin:/bin",
    }
    downloaded = _bash(
        doc_block("docs/mcp.md", 'cairn_mcp.py" -o ~/.cairn/cairn_mcp.py'), tmp_path, **env
    )
    assert downloaded.returncode == 0, downloaded.stderr
    task = post_task(poster)

    # When the page's command prints the configuration any MCP client takes
    printed = _bash(doc_block("docs/mcp.md", '"mcpServers"'), tmp_path, **env)

    # Then it names the server by full paths
    assert printed.returncode == 0, printed.stderr
    [(name, server)] = json.loads(printed.stdout)["mcpServers"].items()
    assert name == "cairn"
    assert server == {
        "command": shutil.which("uv", path=env["PATH"]),
        "args": ["run", "--script", str(tmp_path / ".cairn" / "cairn_mcp.py")],
    }
    # And a client that starts it so, in the person's environment (the address is the file's
    # default), walks the page's flow: no write before consent, a preview that sends nothing, a
    # changed report refused, and the approved digest sent
    person = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    started = StdioServerParameters(**server, env={**person, "HOME": str(tmp_path)})
    answers = anyio.run(_consent_preview_contribute, started, str(task.pk))
    before_consent, preview, changed, sent = answers
    assert before_consent.code == "consent_required"
    assert preview.data["form"] == "plain" and preview.data["issues"] == []
    assert preview.data["public_output_digest"] == canonical_digest(preview.data["report"])
    assert changed.code == "preview_changed"
    assert not sent.is_error, sent.data
    receipt = sent.data["receipt"]
    saved = tmp_path / ".cairn" / "receipts" / f"{receipt['contribution_id']}.json"
    assert json.loads(saved.read_text()) == receipt


async def _consent_preview_contribute(server: StdioServerParameters, task_id: str) -> list[Answer]:
    report = contribution_report()
    async with Client(server) as client:
        digest = canonical_digest(report)
        before_consent = await call(
            client,
            "cairn_a2a_contribute",
            {"task_id": task_id, "report": report, "public_output_digest": digest},
        )
        await call(client, "cairn_local_set_consent", {"public_output": True})
        preview = await call(client, "cairn_a2a_contribute", {"task_id": task_id, "report": report})
        approved = preview.data["public_output_digest"]
        changed = await call(
            client,
            "cairn_a2a_contribute",
            {
                "task_id": task_id,
                "report": {**report, "summary": report["summary"] + "!"},
                "public_output_digest": approved,
            },
        )
        sent = await call(
            client,
            "cairn_a2a_contribute",
            {"task_id": task_id, "report": report, "public_output_digest": approved},
        )
    return [before_consent, preview, changed, sent]


def test_the_local_server_built_from_the_repository_is_the_served_one_but_for_its_url(
    live_url, tmp_path
):
    command = re.search(
        r"`(python3 -m core\.amalgam local_mcp/cairn_mcp\.py)`", doc_text("docs/verify.md")
    )
    built = _run(command[1].split(), cwd=ROOT)
    served = httpx.get(f"{live_url}/mcp/cairn_mcp.py", timeout=20).text

    assert built.returncode == 0, built.stderr
    differ = [
        (mine, theirs)
        for mine, theirs in zip(built.stdout.splitlines(), served.splitlines(), strict=True)
        if mine != theirs
    ]
    assert differ == [
        ('DEFAULT_CAIRN_URL = "http://127.0.0.1:8000"', f'DEFAULT_CAIRN_URL = "{live_url}"')
    ]
