"""SPEC §14: a bad setting stops start-up with one line naming the variable; a fresh clone's
commands work as the README and docs/ print them."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cairn.env import env_seal_key, env_signing_key
from tests.docs import doc_block

ROOT = Path(__file__).resolve().parents[2]
PUBLIC_SITE = {"SECRET_KEY": "k", "CAIRN_SITE_URL": "https://cairn.example"}
GOOD = {**PUBLIC_SITE, "CAIRN_GRPC_URL": "grpc.cairn.example:443"}
PRIMARY = {"DATABASE_URL": "postgres://db.example/cairn"}


# Keys are required when not DEBUG (SPEC §14): every start here gets the tests' own.
KEYS = {name: os.environ[name] for name in ("CAIRN_SIGNING_KEY", "CAIRN_SEAL_KEY")}


def _clean_env(**env: str) -> dict[str, str]:
    """This process's environment without Cairn's settings, plus `env`; no `.env` unless named."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CAIRN_")
        and k not in {"DATABASE_URL", "DEBUG", "SECRET_KEY", "ALLOWED_HOSTS"}
    }
    return {**clean, **KEYS, "CAIRN_ENV_FILE": os.devnull, **env}


def run(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=_clean_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def check(**env: str) -> subprocess.CompletedProcess:
    return run("manage.py", "check", **env)


def assert_one_line_naming(result: subprocess.CompletedProcess, named: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0], result.stderr


@pytest.mark.parametrize(
    "env, named",
    [
        ({**GOOD, "CAIRN_TASKS_PER_AGENT_PER_DAY": "two"}, "CAIRN_TASKS_PER_AGENT_PER_DAY"),
        ({**GOOD, "CAIRN_OPEN_TASKS_PER_AGENT": "-1"}, "CAIRN_OPEN_TASKS_PER_AGENT"),
        ({**GOOD, "CAIRN_KEEPER_LOGIN_FAILURES": "0"}, "CAIRN_KEEPER_LOGIN_FAILURES"),
        ({**GOOD, "CAIRN_KEEPER_LOCKOUT_S": "soon"}, "CAIRN_KEEPER_LOCKOUT_S"),
        ({**GOOD, "DEBUG": "maybe"}, "DEBUG"),
        ({"SECRET_KEY": "k", "CAIRN_SITE_URL": "cairn.example"}, "CAIRN_SITE_URL"),
        ({**GOOD, "DATABASE_URL": "mysql://root@localhost/cairn"}, "DATABASE_URL"),
        (
            {**GOOD, "CAIRN_TASK_DEADLINE_MIN_S": "900", "CAIRN_TASK_DEADLINE_MAX_S": "600"},
            "CAIRN_TASK_DEADLINE_MAX_S",
        ),
        ({**GOOD, "CAIRN_SOURCE_HOSTS": " , "}, "CAIRN_SOURCE_HOSTS"),
        ({**GOOD, "CAIRN_LOG_FORMAT": "xml"}, "CAIRN_LOG_FORMAT"),
        (
            {**GOOD, "CAIRN_DB_POOLER": "Session"},
            "CAIRN_DB_POOLER must be one of transaction, unset",
        ),
        ({**GOOD, "DATABASE_URL": "postgres://db.example/cairn?sslmod=require"}, "sslmod"),
        (
            {**GOOD, "DATABASE_URL": "postgres://db.example/cairn?sslmode=require&sslmode=disable"},
            "DATABASE_URL",
        ),
        ({**GOOD, **PRIMARY, "DATABASE_REPLICA_URLS": "mysql://r.example/cairn"}, "URL 1"),
        (
            {**GOOD, **PRIMARY, "DATABASE_REPLICA_URLS": "postgres://r.example/c, sqlite:///r"},
            "DATABASE_REPLICA_URLS' URL 2 must name PostgreSQL",
        ),
        (
            {**GOOD, **PRIMARY, "DATABASE_REPLICA_URLS": "postgres://r.example/c?sslmod=require"},
            "DATABASE_REPLICA_URLS' URL 1's query string",
        ),
        ({**GOOD, "DATABASE_REPLICA_URLS": "postgres://r.example/cairn"}, "needs DATABASE_URL"),
        ({**GOOD, "DATABASE_URL": "postgres://a.example:5432,b.example:x/c"}, "'b.example:x'"),
        ({**GOOD, "DATABASE_URL": "postgres://a.example,,b.example/c"}, "DATABASE_URL"),
        ({**GOOD, "DATABASE_URL": "postgres://a.example:70000,b.example/c"}, "'a.example:70000'"),
        (
            {**GOOD, "DATABASE_URL": "postgres://a.example,b.example/c?host=d"},
            "host more than once",
        ),
        ({**GOOD, "DATABASE_URL": "postgres:///c?host=a,b&port=1,2,3"}, "3 ports for 2 hosts"),
        (
            {**GOOD, **PRIMARY, "DATABASE_REPLICA_URLS": "postgres://r1,r2/c,postgres://r3,[r4/c"},
            "DATABASE_REPLICA_URLS' URL 2",
        ),
        ({**GOOD, "CAIRN_REPLICA_MAX_LAG_S": "-1"}, "CAIRN_REPLICA_MAX_LAG_S"),
        ({}, "SECRET_KEY"),
        ({"SECRET_KEY": "k", "DEBUG": "false"}, "CAIRN_SITE_URL (or ALLOWED_HOSTS)"),
        ({**GOOD, "CAIRN_SIGNING_KEY": ""}, "CAIRN_SIGNING_KEY"),
        ({**GOOD, "CAIRN_SIGNING_KEY": "/nonexistent/key.pem"}, "CAIRN_SIGNING_KEY"),
        ({**GOOD, "CAIRN_SEAL_KEY": ""}, "CAIRN_SEAL_KEY"),
        ({**GOOD, "CAIRN_SEAL_KEY": "00ff"}, "CAIRN_SEAL_KEY"),
        ({**GOOD, "CAIRN_GRPC_BIND": "50051"}, "CAIRN_GRPC_BIND"),
        ({**GOOD, "CAIRN_GRPC_BIND": "::1:50051"}, "CAIRN_GRPC_BIND"),
        ({**GOOD, "CAIRN_GRPC_BIND": "127.0.0.1:70000"}, "CAIRN_GRPC_BIND"),
        ({**PUBLIC_SITE, "CAIRN_GRPC_BIND": "0.0.0.0:50051"}, "CAIRN_GRPC_URL"),
        # A public site cannot list an address only its own machine reaches (SPEC §8.1).
        (PUBLIC_SITE, "CAIRN_GRPC_URL must be set to an address clients of https://cairn.example"),
        ({**PUBLIC_SITE, "CAIRN_GRPC_BIND": "[::1]:50051"}, "which only this machine reaches"),
        ({**PUBLIC_SITE, "CAIRN_GRPC_URL": "localhost:50051"}, "CAIRN_GRPC_URL"),
        ({**GOOD, "CAIRN_GRPC_URL": "grpc.cairn.example :443"}, "CAIRN_GRPC_URL"),
    ],
)
def test_a_bad_value_stops_start_up_with_one_line_naming_it(env, named):
    assert_one_line_naming(check(**env), named)


@pytest.mark.parametrize(
    "grpc",
    [
        {"CAIRN_GRPC_BIND": ""},
        {"CAIRN_GRPC_URL": "grpc.cairn.example:443"},
        {"CAIRN_GRPC_BIND": "0.0.0.0:50051", "CAIRN_GRPC_URL": "203.0.113.7:50051"},
    ],
)
def test_a_public_site_starts_with_grpc_off_or_at_an_address_clients_reach(tmp_path, grpc):
    result = check(**PUBLIC_SITE, **grpc, DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}")
    assert result.returncode == 0, result.stderr


def test_a_loopback_site_lists_the_loopback_grpc_default(tmp_path):
    result = run(
        "manage.py",
        "shell",
        "-c",
        "from django.conf import settings; print(settings.CAIRN_GRPC_URL)",
        SECRET_KEY="k",
        CAIRN_SITE_URL="http://127.0.0.1:18777",
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "127.0.0.1:50051"


def test_check_deploy_says_a_public_site_lists_a_loopback_grpc_url(tmp_path):
    result = run(
        "manage.py",
        "check",
        "--deploy",
        DEBUG="false",
        SECRET_KEY=secrets.token_urlsafe(50),
        CAIRN_SITE_URL="https://cairn.example",
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
    )
    assert_one_line_naming(result, "CAIRN_GRPC_URL")
    assert "127.0.0.1:50051" in result.stderr and "CAIRN_GRPC_BIND empty" in result.stderr


@pytest.mark.parametrize(("grpc", "warned"), [({}, True), ({"CAIRN_GRPC_BIND": ""}, False)])
def test_check_deploy_warns_a_site_of_public_hosts_its_card_lists_loopback_grpc(
    tmp_path, grpc, warned
):
    """Without CAIRN_SITE_URL the site's origin is each request's, so start-up cannot know it;
    ALLOWED_HOSTS says which hosts other machines reach it by."""
    result = run(
        "manage.py",
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DEBUG="false",
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS="cairn.example,127.0.0.1",
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        **grpc,
    )
    said = result.stdout + result.stderr
    assert ("a2a_gateway.W001" in said) is warned, said
    if warned:
        assert result.returncode != 0
        assert "127.0.0.1:50051" in said and "cairn.example" in said and "CAIRN_GRPC_URL" in said


def test_a_bad_value_stops_the_asgi_and_wsgi_entry_points_the_same_way():
    served = run("-m", "uvicorn", "cairn.asgi:application", "--port", "0", SECRET_KEY="k")
    assert_one_line_naming(served, "CAIRN_SITE_URL (or ALLOWED_HOSTS)")
    wsgi = run("-c", "import cairn.wsgi", **GOOD, CAIRN_RESPONSES_PER_CALL="many")
    assert_one_line_naming(wsgi, "CAIRN_RESPONSES_PER_CALL")


def test_allowed_hosts_alone_is_enough_without_debug(tmp_path):
    result = check(
        SECRET_KEY="k",
        ALLOWED_HOSTS="cairn.example",
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
    )
    assert result.returncode == 0, result.stderr


def test_good_values_start(tmp_path):
    result = check(
        **GOOD,
        CAIRN_TASKS_PER_AGENT_PER_DAY="5",
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
    )
    assert result.returncode == 0, result.stderr


def test_replicas_start_comma_or_space_separated():
    replicas = "postgres://r1.example/cairn?sslmode=require,postgres://r2.example/cairn  postgres://r3.example/cairn"
    result = check(**GOOD, **PRIMARY, DATABASE_REPLICA_URLS=replicas, CAIRN_REPLICA_MAX_LAG_S="2")
    assert result.returncode == 0, result.stderr


# What each connection Cairn opens is given: Django's and the A2A reads' pool's, for the primary
# and for each replica.
CONNECTIONS = """
import json
from django.db import connections
from psycopg.conninfo import conninfo_to_dict
from a2a_gateway import read_connections
from core.replicas import where

def hosts(parameters):
    return {name: str(parameters.get(name)) for name in ("host", "port", "target_session_attrs")}

found = {}
for alias in connections:
    found[alias] = hosts(connections[alias].get_connection_params())
    found[f"{alias} reads pool"] = hosts(conninfo_to_dict(read_connections._conninfo(alias)))
    found[f"{alias} where"] = where(alias)
print(json.dumps(found))
"""


def connections_given(**env: str) -> dict[str, object]:
    result = run("manage.py", "shell", "--no-imports", "-c", CONNECTIONS, **env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.parametrize(
    "url",
    [
        "postgres://cairn@db-1:5432,db-2:5433/cairn?target_session_attrs=read-write",
        "postgres://cairn@/cairn?host=db-1,db-2&port=5432,5433&target_session_attrs=read-write",
    ],
)
def test_every_connection_is_given_every_host_of_a_multi_host_url(url):
    """libpq's multi-host URL and its query-string form: each connection is given both hosts, in
    order, with their ports, so libpq tries each and keeps the one that takes writes."""
    replicas = f"{url.replace('db-', 'replica-')}, postgres://replica-3/cairn?sslmode=require"
    found = connections_given(**GOOD, DATABASE_URL=url, DATABASE_REPLICA_URLS=replicas)
    both = {"host": "db-1,db-2", "port": "5432,5433", "target_session_attrs": "read-write"}
    assert found["default"] == found["default reads pool"] == both
    replicas_both = {**both, "host": "replica-1,replica-2"}
    assert found["replica1"] == found["replica1 reads pool"] == replicas_both
    assert found["replica2"]["host"] == "replica-3"
    assert found["replica1 where"] == "replica-1:5432,replica-2:5433/cairn"


def test_a_multi_host_url_keeps_libpqs_default_port_for_a_host_without_one():
    found = connections_given(**GOOD, DATABASE_URL="postgres://cairn@[::1],db-2:5433/cairn")
    assert found["default"] == {"host": "::1,db-2", "port": ",5433", "target_session_attrs": "None"}
    assert found["default where"] == "::1:5432,db-2:5433/cairn"


def test_django_finds_nothing_to_fix_in_a_production_site_behind_tls(tmp_path):
    """SPEC §16: an https site URL gives HSTS and Secure cookies; `check --deploy` is clean."""
    result = run(
        "manage.py",
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DEBUG="false",
        SECRET_KEY=secrets.token_urlsafe(50),
        CAIRN_SITE_URL="https://cairn.example",
        CAIRN_GRPC_URL="grpc.cairn.example:443",
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
    )
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout, result.stdout


# --- a fresh clone ---------------------------------------------------------------------------------


def make(target: str, cwd: Path, **variables: str) -> subprocess.CompletedProcess:
    assignments = [f"{name}={value}" for name, value in variables.items()]
    return subprocess.run(
        ["make", "--no-print-directory", target, *assignments],
        cwd=cwd,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def env_file(tmp_path) -> Path:
    """The `.env` that `make` writes in a fresh clone (the Makefile run in an empty folder)."""
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    written = make(".env", tmp_path, PYTHON=sys.executable)
    assert written.returncode == 0, written.stderr
    return tmp_path / ".env"


def test_make_writes_env_once_with_its_own_secret_and_git_ignores_it(env_file):
    first = env_file.read_text()
    assert "DEBUG=true" in first.splitlines()
    secret = next(line for line in first.splitlines() if line.startswith("SECRET_KEY="))
    assert len(secret.removeprefix("SECRET_KEY=")) >= 50

    make(".env", env_file.parent, PYTHON=sys.executable)
    assert env_file.read_text() == first
    ignored = subprocess.run(["git", "check-ignore", "-q", ".env"], cwd=ROOT)
    assert ignored.returncode == 0


def test_the_keepers_commands_run_as_printed_with_only_the_env_file(env_file, tmp_path):
    # No SECRET_KEY or DEBUG in the environment: what a newcomer's shell has after `make run`.
    settings = {
        "CAIRN_ENV_FILE": str(env_file),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
    }
    assert run("manage.py", "migrate", "--noinput", **settings).returncode == 0
    # The keeper's page's non-interactive route, run as printed in a clone whose .venv is this one
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / ".venv").symlink_to(sys.prefix)
    (clone / "manage.py").symlink_to(ROOT / "manage.py")
    block = doc_block("docs/keeper.md", "DJANGO_SUPERUSER_USERNAME=")
    keeper = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=clone,
        env=_clean_env(**settings),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert keeper.returncode == 0, keeper.stderr
    assert "Superuser created successfully." in keeper.stdout
    verify = run("manage.py", "card_check", **settings)
    assert verify.returncode == 0, verify.stderr


def test_the_environment_wins_over_the_env_file(tmp_path):
    (tmp_path / ".env").write_text(
        "# a comment\nSECRET_KEY=from-file\nCAIRN_TASKS_PER_AGENT_PER_DAY=two\n\nDEBUG=true\n"
    )
    result = run(
        "manage.py",
        "shell",
        "--no-imports",
        "-c",
        "from django.conf import settings; "
        "print(settings.SECRET_KEY, settings.CAIRN_TASKS_PER_AGENT_PER_DAY)",
        CAIRN_ENV_FILE=str(tmp_path / ".env"),
        CAIRN_TASKS_PER_AGENT_PER_DAY="5",
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["from-file", "5"]


def test_make_test_says_in_one_line_that_chromium_is_missing_before_anything_runs(tmp_path):
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    result = make("test", tmp_path, PYTHON=sys.executable, CHROMIUM="/nonexistent/chromium")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "apt-get install chromium" in lines[0], result.stderr
    assert not (tmp_path / ".venv").exists()


def test_make_run_installs_the_runtime_only_and_make_test_then_adds_the_extras(tmp_path):
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)

    def planned(target: str) -> str:
        dry = subprocess.run(
            ["make", "-n", target, f"PYTHON={sys.executable}", f"CHROMIUM={sys.executable}"],
            cwd=tmp_path,
            env=_clean_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert dry.returncode == 0, dry.stderr
        return dry.stdout

    fresh = planned("run")
    assert "pip install --quiet -e .\n" in fresh and ".[test]" not in fresh
    # After a first `make run`: its virtualenv and its stamp
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").touch()
    (tmp_path / ".venv" / ".installed").touch()
    assert "pip install" not in planned("run")
    test = planned("test")
    assert 'pip install --quiet -e ".[test]"' in test and "-m venv" not in test
    # After `make test`, `make run` installs nothing more
    (tmp_path / ".venv" / ".installed-test").touch()
    assert "pip install" not in planned("run") and "pip install" not in planned("test")


def test_make_superuser_without_a_terminal_fails_saying_how_to_give_the_account(tmp_path):
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    result = subprocess.run(
        ["make", "--no-print-directory", "superuser", f"PYTHON={sys.executable}"],
        cwd=tmp_path,
        env=_clean_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    said = result.stderr.strip().splitlines()[0]
    assert "no terminal" in said and "DJANGO_SUPERUSER_PASSWORD" in said, result.stderr
    assert "createsuperuser --noinput" in said
    assert not (tmp_path / ".venv").exists()


def test_keys_may_be_given_as_file_paths(tmp_path):
    (tmp_path / "signing.pem").write_text(KEYS["CAIRN_SIGNING_KEY"])
    (tmp_path / "seal").write_text(KEYS["CAIRN_SEAL_KEY"] + "\n")
    result = check(
        **GOOD,
        CAIRN_SIGNING_KEY=str(tmp_path / "signing.pem"),
        CAIRN_SEAL_KEY=str(tmp_path / "seal"),
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
    )
    assert result.returncode == 0, result.stderr


def test_with_debug_each_key_is_created_once_and_then_reused(tmp_path):
    signing = env_signing_key("CAIRN_TEST_UNSET_KEY", create_at=tmp_path / "signing_key.pem")
    seal = env_seal_key("CAIRN_TEST_UNSET_KEY", create_at=tmp_path / "seal_key")

    assert signing.startswith("-----BEGIN PRIVATE KEY-----") and len(seal) == 32
    assert (tmp_path / "signing_key.pem").stat().st_mode & 0o777 == 0o600
    assert (
        env_signing_key("CAIRN_TEST_UNSET_KEY", create_at=tmp_path / "signing_key.pem") == signing
    )
    assert env_seal_key("CAIRN_TEST_UNSET_KEY", create_at=tmp_path / "seal_key") == seal
