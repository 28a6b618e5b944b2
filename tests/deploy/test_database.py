"""SPEC §16 on the database, in the deployment's shape (web processes and `qcluster`s, each its
own OS process, on a PostgreSQL of the test's own that also speaks TLS): per-address limits
exact whatever the number of web processes, `DATABASE_URL`'s options on every connection Cairn
opens, and Cairn behind Debian's PgBouncer in transaction pooling mode.

Every figure a test measures is printed (run with -s to see them) and named in its failure.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psycopg
import pytest
from cryptography.hazmat.primitives import serialization

from tests.deploy.pgbouncer import BINARY as PGBOUNCER
from tests.deploy.pgbouncer import TransactionPgBouncer
from tests.deploy.postgres import BIN_DIR, PrivatePostgres, certificate_authority
from tests.deploy.processes import ROOT, Deployment, cairn_env, database_client_ports
from tests.deploy.test_topology import (
    PROMISED_LAG_S,
    _assert_counts_exact,
    _lag_figures,
    _post_tasks,
    _register,
    _wait_evaluated,
)
from tests.factories import contribution_payload

READ_FAILED = "stored read failed"


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


def _a2a(url: str, method: str, params: dict) -> httpx.Response:
    return httpx.post(
        f"{url}/api/a2a",
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
        headers={"A2A-Version": "1.0"},
        timeout=10,
    )


def _log_text(deployment: Deployment) -> str:
    return "\n".join(
        service.log.read_text(errors="replace")
        for service in deployment.services
        if service.log.exists()
    )


def _reads_through_the_pool(deployment: Deployment, task_id: str) -> list[httpx.Response]:
    """GetTask and ListTasks on every web process, once the read pools had time to connect;
    the reads after that must not have needed Django's path (the pool logs each failure).
    Eight at a time, so each pool's connections run them in turn, on whatever server
    connection a pooler gives each."""
    for url in deployment.web_urls:
        _a2a(url, "GetTask", {"id": task_id})
    time.sleep(2)
    logged_before = _log_text(deployment).count(READ_FAILED)
    reads = [
        (url, method, params)
        for _ in range(20)
        for url in deployment.web_urls
        for method, params in (("GetTask", {"id": task_id}), ("ListTasks", {"pageSize": 5}))
    ]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda read: _a2a(*read), reads))
    assert all(a.status_code == 200 and "result" in a.json() for a in answers), answers
    failed = _log_text(deployment).count(READ_FAILED) - logged_before
    assert failed == 0, (
        f"{failed} of {len(reads)} reads failed on the read pool\n{deployment.tails()}"
    )
    return answers


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


def test_the_url_options_reach_every_connection_of_every_process(deploy, postgres):
    """`sslmode=verify-full` with the server's own authority, and an application name: every
    backend of the web processes (Django's pool and the read pool) and of the worker is TLS,
    verified, and named as the URL says."""
    name = "cairn-url-options"
    query = f"?sslmode=verify-full&sslrootcert={postgres.ca_file}&application_name={name}"
    deployment = deploy(url=lambda database: postgres.url(database) + query)
    deployment.manage("migrate", "--noinput")
    webs = [deployment.start_web(), deployment.start_web()]
    worker = deployment.start_worker()
    poster = _register(deployment.web_urls[0])
    (task_id,) = _post_tasks(deployment, 1, first_s=3600, last_s=3600)
    contributed = httpx.post(
        f"{deployment.web_urls[1]}/api/a2a-tasks/{task_id}/contributions",
        json=contribution_payload(),
        headers=poster,
        timeout=10,
    )
    assert contributed.status_code == 201, contributed.text
    _reads_through_the_pool(deployment, task_id)

    give_up = time.monotonic() + 20
    while True:
        held = {
            service.name + str(index): set().union(
                *database_client_ports(service.tree(), postgres.port).values()
            )
            for index, service in enumerate([*webs, worker])
        }
        if all(held.values()) or time.monotonic() > give_up:
            break
        time.sleep(0.5)
    backends = {
        port: (ssl, application)
        for port, ssl, application in _rows(
            deployment,
            "SELECT a.client_port, s.ssl, a.application_name FROM pg_stat_activity a "
            "JOIN pg_stat_ssl s USING (pid) WHERE a.datname = current_database() "
            "AND a.pid <> pg_backend_pid()",
        )
    }
    print(f"\nbackends (client port: TLS, application): {backends}; held: {held}")
    assert all(held.values()), f"a process holds no database connection: {held}"
    ports = set().union(*held.values())
    assert ports <= set(backends), f"connections PostgreSQL does not list: {ports - set(backends)}"
    assert {backends[port] for port in ports} == {(True, name)}, backends


def test_a_server_certificate_the_url_does_not_trust_stops_start_up(deploy, postgres, tmp_path):
    _, stranger = certificate_authority("Not the database's authority")
    wrong_ca = tmp_path / "wrong-ca.pem"
    wrong_ca.write_bytes(stranger.public_bytes(serialization.Encoding.PEM))
    deployment = deploy(
        url=lambda database: postgres.url(database) + f"?sslmode=verify-full&sslrootcert={wrong_ca}"
    )
    done = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=ROOT,
        env=deployment.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    print(
        f"\nmigrate with an authority that did not sign the server's certificate:\n{done.stderr[-400:]}"
    )
    assert done.returncode != 0, "Cairn connected to a server its URL does not trust"
    assert "certificate verify failed" in done.stderr


@pytest.fixture
def pgbouncer(postgres: PrivatePostgres) -> Iterator[TransactionPgBouncer]:
    if PGBOUNCER is None:
        pytest.fail("PgBouncer is needed: apt-get install pgbouncer")
    bouncer = TransactionPgBouncer(postgres)
    bouncer.start()
    yield bouncer
    bouncer.stop()


def test_behind_pgbouncer_in_transaction_mode_every_promise_holds(deploy, pgbouncer):
    """2 web processes and 2 qclusters whose every connection, migrations included, goes through
    PgBouncer with `pool_mode = transaction`: no statement may rely on its session."""
    deployment = deploy(url=pgbouncer.url, CAIRN_DB_POOLER="transaction")
    deployment.manage("migrate", "--noinput")
    deployment.start_web()
    deployment.start_web()
    deployment.start_worker()
    deployment.start_worker()

    ids = _post_tasks(deployment, 30, first_s=15, last_s=25)
    contributors = [_register(deployment.web_urls[1]) for _ in range(2)]
    answers: list[httpx.Response] = []
    for task_id in ids[:10]:
        for agent in contributors:
            answers.append(
                httpx.post(
                    f"{deployment.web_urls[1]}/api/a2a-tasks/{task_id}/contributions",
                    json=contribution_payload(),
                    headers=agent,
                    timeout=10,
                )
            )
    assert all(answer.status_code == 201 for answer in answers), [
        answer.text for answer in answers if answer.status_code != 201
    ]
    answers += _reads_through_the_pool(deployment, ids[0])
    for url in deployment.web_urls:
        answers += [httpx.get(f"{url}/api/a2a-tasks/{task_id}", timeout=10) for task_id in ids]

    rows = _wait_evaluated(
        lambda sql, *params: _rows(deployment, sql, *params), ids, timeout=25 + PROMISED_LAG_S + 30
    )
    lags = [(row[2] - row[1]).total_seconds() for row in rows if row[2] is not None]
    print(
        f"\nbehind PgBouncer (transaction): 30 tasks, {_lag_figures(lags) if lags else 'none evaluated'}"
    )
    assert len(lags) == len(ids), f"{len(ids) - len(lags)} of 30 still open\n{deployment.tails()}"
    assert max(lags) <= PROMISED_LAG_S, f"evaluated late: {_lag_figures(lags)}"
    first = {row[0]: row[2] for row in rows}
    time.sleep(3)
    again = {
        row[0]: row[2]
        for row in _rows(
            deployment,
            "SELECT id::text, deadline, evaluated_at FROM tasks_task WHERE id::text = ANY(%s)",
            ids,
        )
    }
    assert first == again, "an evaluation changed after it was made"
    outcomes = dict(
        _rows(
            deployment,
            "SELECT outcome, count(*) FROM tasks_task WHERE id::text = ANY(%s) GROUP BY outcome",
            ids,
        )
    )
    assert outcomes == {"resolved": 10, "unresolved": 20}
    _assert_counts_exact(lambda sql, *params: _rows(deployment, sql, *params))

    answers += [httpx.get(f"{url}/readyz", timeout=10) for url in deployment.web_urls]
    server_errors = [
        (a.request.url, a.status_code, a.text[:200]) for a in answers if a.status_code >= 500
    ]
    assert not server_errors, server_errors
    logs = _log_text(deployment) + pgbouncer.log.read_text(errors="replace")
    for trouble in ("prepared statement", "Traceback", "unsupported startup parameter"):
        assert trouble not in logs, (
            f"{trouble!r} in the logs\n{deployment.tails()}\n{pgbouncer.tail()}"
        )
