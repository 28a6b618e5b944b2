"""SPEC §16 on the database, in the deployment's shape (web processes and `qcluster`s, each its
own OS process, on a PostgreSQL of the test's own that also speaks TLS): per-address limits
exact whatever the number of web processes.

Every figure a test measures is printed (run with -s to see them) and named in its failure.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.deploy.postgres import BIN_DIR, PrivatePostgres
from tests.deploy.processes import Deployment, cairn_env


@pytest.fixture(scope="module")
def postgres() -> Iterator[PrivatePostgres]:
    if BIN_DIR is None:
        pytest.fail(
            "PostgreSQL's server binaries (initdb, pg_ctl) are needed: apt-get install postgresql"
        )
    server = PrivatePostgres(tls=True)
    server.start()
    server.wait_ready()
    yield server
    server.stop()
    server.remove()


@pytest.fixture
def deploy(postgres: PrivatePostgres, tmp_path: Path) -> Iterator[Callable[..., Deployment]]:
    """A deployment on a fresh database, not migrated yet: `url` gives the `DATABASE_URL` for a
    database's name (by default the server's own address), `settings` Cairn's settings."""
    made: list[tuple[Deployment, str]] = []

    def make(url: Callable[[str], str] | None = None, **settings: str) -> Deployment:
        database = f"cairn_{uuid.uuid4().hex[:12]}"
        postgres.create_database(database)
        database_url = (url or postgres.url)(database)
        logs = tmp_path / database
        logs.mkdir()
        deployment = Deployment(
            broker="orm",
            postgres=postgres,
            database_url=postgres.url(database),
            env=cairn_env(database_url, **settings),
            logs=logs,
        )
        made.append((deployment, database))
        return deployment

    yield make
    for deployment, database in made:
        deployment.stop_all()
        with psycopg.connect(postgres.url("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def _rows(deployment: Deployment, sql: str, *params) -> list[tuple]:
    with psycopg.connect(deployment.database_url, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


def test_registrations_at_once_from_one_address_stop_exactly_at_the_limit(deploy):
    deployment = deploy(CAIRN_REGISTRATIONS_PER_IP_PER_HOUR="20")
    deployment.manage("migrate", "--noinput")
    deployment.start_web()
    deployment.start_web()
    address = "203.0.113.7"  # what the proxy (127.0.0.1, FORWARDED_ALLOW_IPS) says it saw
    start = threading.Barrier(40)

    def register(n: int) -> httpx.Response:
        url = deployment.web_urls[n % 2]
        with httpx.Client(headers={"X-Forwarded-For": address}, timeout=30) as client:
            client.get(f"{url}/healthz")  # connected before the barrier: all 40 leave at once
            start.wait()
            return client.post(f"{url}/api/agent/register", json={})

    with ThreadPoolExecutor(40) as pool:
        answers = list(pool.map(register, range(40)))

    statuses = Counter(answer.status_code for answer in answers)
    agents = _rows(deployment, "SELECT count(*) FROM agents_agent")[0][0]
    print(
        f"\n40 registrations at once, 2 web processes, limit 20: {dict(statuses)}, {agents} agents"
    )
    assert statuses == {201: 20, 429: 20}, f"{dict(statuses)}\n{deployment.tails()}"
    assert agents == 20
    for answer in answers:
        if answer.status_code == 429:
            assert answer.json()["error"]["code"] == "rate_limited"
            assert int(answer.headers["Retry-After"]) > 0
    other = httpx.post(
        f"{deployment.web_urls[1]}/api/agent/register",
        json={},
        headers={"X-Forwarded-For": "203.0.113.8"},
        timeout=10,
    )
    assert other.status_code == 201, "another address is not limited by this one"
