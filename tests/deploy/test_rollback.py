"""SPEC §16.2: a database that goes back in time is caught, never silent. A site's database is
restored from a dump taken before its last writes, as an operator restoring last night's backup
would: the site keeps serving what it holds, signs no checkpoint that contradicts one it signed,
refuses writes saying why, and `/readyz`, `/metrics` and the worker's log all name the rollback;
then the keeper's command, as docs/deployment.md prints it, starts a new log and the site takes
writes again.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.deploy.postgres import BIN_DIR, PrivatePostgres
from tests.deploy.processes import ROOT, Deployment, cairn_env
from tests.docs import doc_block
from tests.factories import contribution_payload, deadline_in, open_task_payload, open_task_request

DATABASE = "cairn_rollback"


def _started(postgres: PrivatePostgres, url: str, logs: Path) -> Deployment:
    """A web process and a worker on `url`, its database migrated; checkpoints every second."""
    deployed = Deployment(
        broker="orm",
        postgres=postgres,
        database_url=url,
        env=cairn_env(url, CAIRN_LOG_INTERVAL_S="1"),
        logs=logs,
    )
    deployed.manage("migrate", "--noinput")
    deployed.start_web()
    deployed.start_worker()
    return deployed


@pytest.fixture
def site(postgres: PrivatePostgres, tmp_path: Path) -> Iterator[Deployment]:
    postgres.create_database(DATABASE)
    deployed = _started(postgres, postgres.url(DATABASE), tmp_path)
    yield deployed
    deployed.stop_all()
    with psycopg.connect(postgres.url("postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')


def _register(url: str) -> dict[str, str]:
    response = httpx.post(f"{url}/api/agent/register", json={}, timeout=10)
    assert response.status_code == 201, response.text
    return {"Authorization": f"Bearer {response.json()['token']}"}


def _post_task(url: str, poster: dict[str, str]) -> str:
    payload = open_task_payload(
        open_task_request(title=f"Rollback {uuid.uuid4().hex[:8]}", deadline=deadline_in(900))
    )
    headers = poster | {"Idempotency-Key": str(uuid.uuid4())}
    response = httpx.post(f"{url}/api/a2a-tasks", json=payload, headers=headers, timeout=10)
    assert response.status_code == 201, response.text
    return response.json()["task"]["id"]


def _contribute(url: str, task_id: str, agent: dict[str, str]) -> httpx.Response:
    return httpx.post(
        f"{url}/api/a2a-tasks/{task_id}/contributions",
        json=contribution_payload(),
        headers=agent | {"Idempotency-Key": str(uuid.uuid4())},
        timeout=10,
    )


def _writes(url: str, count: int) -> list[str]:
    """`count` tasks, each with one contribution (2·count log entries): the tasks' ids."""
    poster, contributor = _register(url), _register(url)
    tasks = []
    for _ in range(count):
        tasks.append(_post_task(url, poster))
        answer = _contribute(url, tasks[-1], contributor)
        assert answer.status_code == 201, answer.text
    return tasks


def _checkpoint_size(url: str) -> int:
    """The latest checkpoint's tree size; 0 before the first."""
    answer = httpx.get(f"{url}/api/log/checkpoint", timeout=10)
    return int(answer.text.splitlines()[1]) if answer.status_code == 200 else 0


def _signed_at_least(url: str, size: int, site: Deployment) -> str:
    """The latest checkpoint's note once its tree holds `size` entries."""
    give_up = time.monotonic() + 60
    while _checkpoint_size(url) < size:
        assert time.monotonic() < give_up, f"no checkpoint of {size} entries\n{site.tails()}"
        time.sleep(0.5)
    return httpx.get(f"{url}/api/log/checkpoint", timeout=10).text


def _pg(tool: str, *args: str) -> None:
    assert BIN_DIR is not None
    subprocess.run([str(BIN_DIR / tool), *args], check=True, capture_output=True)


def test_a_restore_from_an_older_dump_stops_the_site_saying_why(
    site: Deployment, postgres: PrivatePostgres, tmp_path: Path
):
    url = site.web_urls[0]
    tasks = _writes(url, 3)
    _signed_at_least(url, 6, site)
    dump = tmp_path / "older.dump"
    _pg("pg_dump", "-Fc", "-f", str(dump), site.database_url)
    kept = _checkpoint_size(url)
    tile_before = httpx.get(f"{url}/api/log/tile/entries/000.p/{kept}", timeout=10)
    assert tile_before.status_code == 200

    _writes(url, 4)
    signed = _signed_at_least(url, kept + 8, site)
    signed_size = int(signed.splitlines()[1])
    grown_tile = httpx.get(f"{url}/api/log/tile/entries/000.p/{signed_size}", timeout=10)
    assert grown_tile.status_code == 200

    # The operator restores the older dump over the database and starts the site again.
    site.stop_all()
    with psycopg.connect(postgres.url("postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{DATABASE}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DATABASE}"')
    _pg("pg_restore", "--no-owner", "-d", site.database_url, str(dump))
    site.web_urls.clear()
    site.start_web()
    worker = site.start_worker()
    url = site.web_urls[0]

    give_up = time.monotonic() + 60
    while (ready := httpx.get(f"{url}/readyz", timeout=10)).json()["checks"]["log"]["ok"]:
        assert time.monotonic() < give_up, f"the rollback was never noticed\n{site.tails()}"
        time.sleep(0.5)
    assert ready.status_code == 503
    log_check = ready.json()["checks"]["log"]
    assert log_check["promised_size"] == signed_size
    assert log_check["database_size"] < signed_size
    assert "gone back" in log_check["detail"]

    payload = open_task_payload(
        open_task_request(title="After the restore", deadline=deadline_in(900))
    )
    headers = _register(url) | {"Idempotency-Key": str(uuid.uuid4())}
    posted = httpx.post(f"{url}/api/a2a-tasks", json=payload, headers=headers, timeout=10)
    contributed = _contribute(url, tasks[0], _register(url))
    for refused in (posted, contributed):
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == "unavailable"
        assert "gone back" in refused.json()["error"]["message"]

    metrics = httpx.get(f"{url}/metrics", timeout=10).text
    assert "cairn_log_rolled_back 1.0" in metrics

    log = worker.log.read_text()
    assert "ERROR" in log and f"the tree of {signed_size} entries the site signed" in log

    # Nothing served contradicts what was signed: no checkpoint of another tree, and every tile
    # URL serves its old bytes or nothing.
    time.sleep(3)
    assert _checkpoint_size(url) < signed_size
    assert httpx.get(f"{url}/api/log/tile/entries/000.p/{kept}", timeout=10).content == (
        tile_before.content
    )
    assert (
        httpx.get(f"{url}/api/log/tile/entries/000.p/{signed_size}", timeout=10).status_code == 404
    )

    old_urls = [f"{url}/api/log/checkpoint", f"{url}/api/log/tile/entries/000.p/{kept}"]
    old = [httpx.get(served, timeout=10).content for served in old_urls]
    printed = _log_restarted(site)
    database_size = log_check["database_size"]
    assert f"lost_from {database_size}: the previous checkpoint held {signed_size}" in printed

    give_up = time.monotonic() + 60
    while not httpx.get(f"{url}/readyz", timeout=10).json()["checks"]["log"]["ok"]:
        assert time.monotonic() < give_up, f"the new log never took over\n{site.tails()}"
        time.sleep(0.5)
    _writes(url, 1)  # a task and a contribution, after the restart entry
    give_up = time.monotonic() + 60
    while _log_size(f"{url}/api/log/1/checkpoint") < 3:
        assert time.monotonic() < give_up, f"the new log is not signed\n{site.tails()}"
        time.sleep(0.5)
    restarted = httpx.get(f"{url}/api/log/1/entries?start=0&end=1", timeout=10).json()
    (restart,) = restarted["entries"]
    assert restart["entry"]["lost_from"] == database_size
    assert restart["entry"]["previous_checkpoint"] == signed
    assert [httpx.get(served, timeout=10).content for served in old_urls] == old
    card = httpx.get(f"{url}/.well-known/agent-card.json", timeout=10).json()
    (verifiable,) = [
        e for e in card["capabilities"]["extensions"] if e["uri"] == "urn:cairn:verifiable:v1"
    ]
    assert [log["checkpoint"] for log in verifiable["params"]["logs"]] == [
        f"{url}/api/log/checkpoint",
        f"{url}/api/log/1/checkpoint",
    ]


def _log_size(checkpoint_url: str) -> int:
    answer = httpx.get(checkpoint_url, timeout=10)
    return int(answer.text.splitlines()[1]) if answer.status_code == 200 else 0


def _log_restarted(site: Deployment) -> str:
    """Run the keeper's command as docs/deployment.md prints it, with the worker running: it is
    refused, saying so, while a sequencer run holds the lock, and run again."""
    command = doc_block("docs/deployment.md", "manage.py log_restart")
    give_up = time.monotonic() + 60
    while True:
        done = subprocess.run(
            ["bash", "-c", command], cwd=ROOT, env=site.env, capture_output=True, text=True
        )
        if done.returncode == 0:
            return done.stdout
        assert "the sequencer is at work" in done.stderr, done.stderr
        assert time.monotonic() < give_up, done.stderr
        time.sleep(0.2)


def _replayed(primary: PrivatePostgres, standby: PrivatePostgres) -> None:
    """Wait until the standby has replayed everything the primary wrote."""
    with psycopg.connect(primary.url("postgres"), autocommit=True) as conn:
        (written,) = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    give_up = time.monotonic() + 30
    while True:
        with psycopg.connect(standby.url("postgres"), autocommit=True) as conn:
            (caught_up,) = conn.execute(
                "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [written]
            ).fetchone()
        if caught_up:
            return
        assert time.monotonic() < give_up, "the standby never caught up"
        time.sleep(0.2)


def _streaming_to(primary: PrivatePostgres) -> int:
    with psycopg.connect(primary.url("postgres"), autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_replication").fetchone()[0]


def test_a_failover_to_an_asynchronous_standby_that_was_behind_stops_the_site(tmp_path: Path):
    if BIN_DIR is None:
        pytest.fail("PostgreSQL's server binaries (initdb, pg_basebackup, pg_ctl) are needed")
    primary = PrivatePostgres()
    primary.start()
    primary.wait_ready()
    primary.create_database(DATABASE)
    standby = PrivatePostgres(replica_of=primary)
    standby.start()
    standby.wait_ready()
    # Both servers in one URL: Cairn's connections go to whichever takes writes.
    url = (
        f"postgres://postgres@/{DATABASE}?host=127.0.0.1,127.0.0.1"
        f"&port={primary.port},{standby.port}&target_session_attrs=read-write"
    )
    site = None
    try:
        site = _started(primary, url, tmp_path)
        web = site.web_urls[0]
        tasks = _writes(web, 3)
        _signed_at_least(web, 6, site)
        _replayed(primary, standby)

        standby.stream_stopped()
        give_up = time.monotonic() + 30
        while _streaming_to(primary):
            assert time.monotonic() < give_up, "the standby still streams"
            time.sleep(0.2)
        _writes(web, 4)  # answered, receipts issued: on the primary alone
        signed_size = int(_signed_at_least(web, 14, site).splitlines()[1])

        primary.kill()
        standby.promote()

        give_up = time.monotonic() + 90
        while True:
            try:
                ready = httpx.get(f"{web}/readyz", timeout=10)
                if not ready.json()["checks"]["log"]["ok"]:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < give_up, f"the rollback was never noticed\n{site.tails()}"
            time.sleep(0.5)
        log_check = ready.json()["checks"]["log"]
        assert ready.status_code == 503
        assert log_check["promised_size"] == signed_size
        assert log_check["database_size"] < signed_size
        refused = _contribute(web, tasks[0], _register(web))
        assert refused.status_code == 503, refused.text
        assert "gone back" in refused.json()["error"]["message"]
        assert _checkpoint_size(web) < signed_size
    finally:
        if site is not None:
            site.stop_all()
        for server in (standby, primary):
            try:
                server.stop()
            except subprocess.CalledProcessError:
                pass
            server.remove()
