"""The deployment's shape (SPEC §16): a private PostgreSQL, two uvicorn processes and qclusters,
each a separate OS process, for each broker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis

from tests.deploy.postgres import BIN_DIR, PrivatePostgres
from tests.deploy.processes import Deployment, cairn_env
from tests.workers import redis_url

REDIS_URL = redis_url()

BROKERS = {"orm": {}, "redis": {"CAIRN_REDIS_URL": REDIS_URL}}


@pytest.fixture(scope="module")
def postgres() -> Iterator[PrivatePostgres]:
    if BIN_DIR is None:
        pytest.fail(
            "PostgreSQL's server binaries (initdb, pg_ctl) are needed: apt-get install postgresql"
        )
    server = PrivatePostgres()
    server.start()
    server.wait_ready()
    yield server
    server.stop()
    server.remove()


def two_web_processes(
    postgres: PrivatePostgres, database: str, broker: str, logs: Path
) -> Iterator[Deployment]:
    """A migrated database of its own and two uvicorn processes on it; dropped after."""
    postgres.create_database(database)
    env = cairn_env(postgres.url(database), **BROKERS[broker])
    deployed = Deployment(
        broker=broker, postgres=postgres, database_url=postgres.url(database), env=env, logs=logs
    )
    deployed.manage("migrate", "--noinput")
    deployed.start_web()
    deployed.start_web()
    yield deployed
    deployed.stop_all()
    with psycopg.connect(postgres.url("postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


@pytest.fixture(scope="module", params=sorted(BROKERS))
def deployment(request, postgres: PrivatePostgres, tmp_path_factory) -> Iterator[Deployment]:
    broker = request.param
    if broker == "redis":
        redis.Redis.from_url(REDIS_URL).flushdb()
    logs = tmp_path_factory.mktemp(f"logs-{broker}")
    yield from two_web_processes(postgres, f"cairn_{broker}", broker, logs)


@pytest.fixture
def db_rows(deployment: Deployment):
    """Plain SQL on the deployment's database, outside Cairn: reading through a door would
    evaluate overdue tasks itself, and these tests are about the worker doing it."""

    def query(sql: str, *params) -> list[tuple]:
        with psycopg.connect(deployment.database_url, autocommit=True) as conn:
            return conn.execute(sql, params).fetchall()

    return query
