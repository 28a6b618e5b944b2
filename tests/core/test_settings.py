"""SPEC §14: a bad setting stops start-up with a message naming the variable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cairn.env import env_seal_key, env_signing_key

ROOT = Path(__file__).resolve().parents[2]


# Keys are required when not DEBUG (SPEC §14): every start here gets the tests' own.
KEYS = {name: os.environ[name] for name in ("CAIRN_SIGNING_KEY", "CAIRN_SEAL_KEY")}


def check(**env: str) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CAIRN_") and k not in {"DATABASE_URL", "DEBUG", "SECRET_KEY"}
    }
    clean.update(KEYS)
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize(
    "env, named",
    [
        (
            {"SECRET_KEY": "k", "CAIRN_TASKS_PER_AGENT_PER_DAY": "two"},
            "CAIRN_TASKS_PER_AGENT_PER_DAY",
        ),
        ({"SECRET_KEY": "k", "CAIRN_OPEN_TASKS_PER_AGENT": "-1"}, "CAIRN_OPEN_TASKS_PER_AGENT"),
        ({"SECRET_KEY": "k", "DEBUG": "maybe"}, "DEBUG"),
        ({"SECRET_KEY": "k", "CAIRN_SITE_URL": "cairn.example"}, "CAIRN_SITE_URL"),
        ({"SECRET_KEY": "k", "DATABASE_URL": "mysql://root@localhost/cairn"}, "DATABASE_URL"),
        (
            {
                "SECRET_KEY": "k",
                "CAIRN_TASK_DEADLINE_MIN_S": "900",
                "CAIRN_TASK_DEADLINE_MAX_S": "600",
            },
            "CAIRN_TASK_DEADLINE_MAX_S",
        ),
        ({"SECRET_KEY": "k", "CAIRN_SOURCE_HOSTS": " , "}, "CAIRN_SOURCE_HOSTS"),
        ({}, "SECRET_KEY"),
        ({"SECRET_KEY": "k", "CAIRN_SIGNING_KEY": ""}, "CAIRN_SIGNING_KEY"),
        ({"SECRET_KEY": "k", "CAIRN_SIGNING_KEY": "/nonexistent/key.pem"}, "CAIRN_SIGNING_KEY"),
        ({"SECRET_KEY": "k", "CAIRN_SEAL_KEY": ""}, "CAIRN_SEAL_KEY"),
        ({"SECRET_KEY": "k", "CAIRN_SEAL_KEY": "00ff"}, "CAIRN_SEAL_KEY"),
    ],
)
def test_a_bad_value_stops_start_up_naming_it(env, named):
    result = check(**env)
    assert result.returncode != 0
    assert named in result.stderr


def test_good_values_start(tmp_path):
    result = check(
        SECRET_KEY="k",
        CAIRN_SITE_URL="https://cairn.example",
        CAIRN_TASKS_PER_AGENT_PER_DAY="5",
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
    )
    assert result.returncode == 0, result.stderr


def test_keys_may_be_given_as_file_paths(tmp_path):
    (tmp_path / "signing.pem").write_text(KEYS["CAIRN_SIGNING_KEY"])
    (tmp_path / "seal").write_text(KEYS["CAIRN_SEAL_KEY"] + "\n")
    result = check(
        SECRET_KEY="k",
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
