"""SPEC §16.2: a database that goes back in time is caught, never silent, and the way out hides
nothing. A site witnessed by a second Cairn loses its last writes, as an operator would lose
them: its database restored from a dump taken before them, or its primary killed while an
asynchronous standby had stopped receiving them and the standby promoted. The site keeps serving
what it holds, signs no checkpoint that contradicts one it signed, refuses writes saying why, and
`/readyz`, `/metrics` and the worker's log name the rollback. Then the keeper runs the command
docs/deployment.md prints and the witness's operator follows the new log with the key it prints:
writes are answered again, the witness cosigns the new log, no tile URL served before changes
its bytes, and the verifier the site serves, run over every receipt kept, reports exactly the
receipts whose contributions the database lost as dropped by the site and passes every other.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.deploy.failover import (
    Checkpoint,
    Witness,
    site_cairn,
    started,
    wait_cosigned,
    witness_cairn,
)
from tests.deploy.postgres import BIN_DIR, PrivatePostgres
from tests.deploy.processes import ROOT, Deployment
from tests.docs import doc_block
from tests.factories import contribution_payload, deadline_in, open_task_payload, open_task_request

DATABASE = "cairn_rollback"
# More entries than were lost are written to the new log, so the old log's tile URLs past what
# the database kept would cover new entries were they served from the shared leaves.
WRITES_LOST, WRITES_AFTER = 4, 5


def _witness(folder: Path, server: PrivatePostgres) -> Witness:
    """A witness Cairn, its files and logs in a folder of their own."""
    (folder / "witness").mkdir()
    return witness_cairn(folder / "witness", server)


@pytest.fixture
def witnessed_site(
    postgres: PrivatePostgres, tmp_path: Path
) -> Iterator[tuple[Deployment, Witness]]:
    postgres.create_database(DATABASE)
    witness = _witness(tmp_path, postgres)
    site = site_cairn(postgres.url(DATABASE), postgres, witness, tmp_path)
    yield site, witness
    site.stop_all()
    witness.deployment.stop_all()
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


def _writes(url: str, count: int) -> list[dict[str, Any]]:
    """`count` tasks, each with one contribution (2·count log entries): the receipts kept."""
    poster, contributor = _register(url), _register(url)
    receipts = []
    for _ in range(count):
        answer = _contribute(url, _post_task(url, poster), contributor)
        assert answer.status_code == 201, answer.text
        receipts.append(answer.json()["receipt"])
    return receipts


def _checkpoint_size(url: str) -> int:
    """The latest checkpoint's tree size; 0 before the first."""
    answer = httpx.get(f"{url}/api/log/checkpoint", timeout=10)
    return int(answer.text.splitlines()[1]) if answer.status_code == 200 else 0


def _tiles(url: str, size: int) -> dict[str, bytes]:
    """The partial tiles of the log's first `size` entries (a hash tile and an entry bundle),
    by path: what a reader fetched when the checkpoint held `size`."""
    assert size < 256, "the tests' trees fit in one partial tile"
    served = {}
    for path in (f"/api/log/tile/0/000.p/{size}", f"/api/log/tile/entries/000.p/{size}"):
        answer = httpx.get(f"{url}{path}", timeout=10)
        assert answer.status_code == 200, (path, answer.text)
        served[path] = answer.content
    return served


def _pg(tool: str, *args: str) -> None:
    assert BIN_DIR is not None
    subprocess.run([str(BIN_DIR / tool), *args], check=True, capture_output=True)


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _rollback_noticed(site: Deployment, url: str) -> dict[str, Any]:
    """`/readyz`'s log check once the site has found its log gone back (it may not answer at all
    for a while, its database just back)."""
    give_up = time.monotonic() + 90
    while True:
        try:
            ready = httpx.get(f"{url}/readyz", timeout=10)
            if not ready.json()["checks"]["log"]["ok"]:
                break
        except httpx.TransportError:
            pass
        assert time.monotonic() < give_up, f"the rollback was never noticed\n{site.tails()}"
        time.sleep(0.5)
    assert ready.status_code == 503
    return ready.json()["checks"]["log"]


def _refused(answer: httpx.Response) -> None:
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["code"] == "unavailable"
    assert "gone back" in answer.json()["error"]["message"]


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


def _new_log(
    site: Deployment,
    witness: Witness,
    url: str,
    *,
    held: Checkpoint,
    lost_from: int,
    logged_again: int,
    tiles: dict[str, bytes],
) -> list[dict[str, Any]]:
    """The way out as docs/deployment.md prints it: the keeper's command, which logs again the
    `logged_again` entries the database held queued, then the witness's operator adding the key
    it prints. Writes are answered again, the witness cosigns the new
    log, whose first entry names the lost range, the card lists both logs, and every tile URL
    served before serves its bytes still, or nothing past what the database kept. Returns the
    receipts of the writes after it."""
    # The web process has served the card before the command, in a process of its own, runs.
    assert _card_log_checkpoints(url) == [f"{url}/api/log/checkpoint"]
    printed = _log_restarted(site)
    assert f"lost_from {lost_from}: the previous checkpoint held {held.size}" in printed
    assert f"logged again {logged_again} queued entries" in printed
    new_key = re.search(r"witnesses follow it with the verifier key (\S+)", printed)
    assert new_key is not None, printed
    witness.follow(new_key[1])

    give_up = time.monotonic() + 60
    while not httpx.get(f"{url}/readyz", timeout=10).json()["checks"]["log"]["ok"]:
        assert time.monotonic() < give_up, f"the new log never took over\n{site.tails()}"
        time.sleep(0.5)
    after = _writes(url, WRITES_AFTER)
    # The restart entry, the entries logged again, then each write's task and contribution.
    wait_cosigned(url, witness, beyond=logged_again + 2 * WRITES_AFTER, log="/api/log/1")

    restarted = httpx.get(f"{url}/api/log/1/entries?start=0&end=1", timeout=10).json()
    (restart,) = restarted["entries"]
    assert restart["entry"]["lost_from"] == lost_from
    assert restart["entry"]["previous_checkpoint"] == held.text
    assert _checkpoint_size(url) < held.size, "log 0 is never signed past what was lost"
    for path, before in tiles.items():
        answer = httpx.get(f"{url}{path}", timeout=10)
        width = int(path.rsplit("/", 1)[1])
        if width <= lost_from:
            assert (answer.status_code, answer.content) == (200, before), path
        else:
            assert answer.status_code == 404, (path, answer.text)
    assert _card_log_checkpoints(url) == [
        f"{url}/api/log/checkpoint",
        f"{url}/api/log/1/checkpoint",
    ]
    return after


def _card_log_checkpoints(url: str) -> list[str]:
    """The checkpoint URL of each log the card lists."""
    card = httpx.get(f"{url}/.well-known/agent-card.json", timeout=10).json()
    (verifiable,) = [
        e for e in card["capabilities"]["extensions"] if e["uri"] == "urn:cairn:verifiable:v1"
    ]
    return [log["checkpoint"] for log in verifiable["params"]["logs"]]


def _verdicts(url: str, receipts: list[dict[str, Any]], folder: Path) -> dict[str, str]:
    """The verifier the site serves, run on each receipt saved as a file, as its holder would:
    its output by contribution, `ok` or `FAILED` leading it."""
    script = folder / "cairn_verify.py"
    script.write_text(httpx.get(f"{url}/verify/cairn_verify.py", timeout=10).text)
    verdicts = {}
    for receipt in receipts:
        saved = folder / f"receipt-{receipt['contribution_id']}.json"
        saved.write_text(json.dumps(receipt))
        checked = subprocess.run(
            [sys.executable, str(script), "receipt", str(saved)],
            env={"CAIRN_HOME": str(folder / "home"), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert checked.returncode in (0, 1), checked.stderr
        verdicts[receipt["contribution_id"]] = (
            f"{'ok' if checked.returncode == 0 else 'FAILED'}\n{checked.stdout}"
        )
    return verdicts


def _assert_exactly_dropped(
    url: str, kept: list[dict[str, Any]], lost: list[dict[str, Any]], folder: Path
) -> None:
    """Every receipt answered is verified: those of the lost writes as dropped by the site, with
    the checkpoint it signed; every other one passes, in the old log or the new."""
    verdicts = _verdicts(url, kept + lost, folder)
    for receipt in lost:
        said = verdicts[receipt["contribution_id"]]
        assert said.startswith("FAILED\n") and "FAIL  DROPPED BY THE SITE" in said, said
    for receipt in kept:
        said = verdicts[receipt["contribution_id"]]
        assert said.startswith("ok\n") and "DROPPED" not in said, said
    print(f"\n{len(lost)} receipts reported dropped by the site, {len(kept)} verified")


def test_a_restore_from_an_older_dump_is_caught_and_the_new_log_drops_exactly_its_lost_receipts(
    witnessed_site: tuple[Deployment, Witness], postgres: PrivatePostgres, tmp_path: Path
):
    site, witness = witnessed_site
    url = site.web_urls[0]
    kept = _writes(url, 3)
    dumped = wait_cosigned(url, witness, beyond=5)
    tiles = _tiles(url, dumped.size)
    # The dump lands after a write was answered and before the sequencer logged it (the worker
    # is stopped meanwhile): its contribution is in the dump, queued, and is logged again.
    (worker,) = site.workers()
    worker.kill_all()
    kept += _writes(url, 1)
    dump = tmp_path / "older.dump"
    _pg("pg_dump", "-Fc", "-f", str(dump), site.database_url)
    site.start_worker()

    lost = _writes(url, WRITES_LOST)
    held = wait_cosigned(url, witness, beyond=dumped.size + 2 * (1 + WRITES_LOST) - 1)
    tiles |= _tiles(url, held.size)

    # The operator restores the older dump over the database and starts the site again.
    site.stop_all()
    with psycopg.connect(postgres.url("postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{DATABASE}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DATABASE}"')
    _pg("pg_restore", "--no-owner", "-d", site.database_url, str(dump))
    site.web_urls.clear()
    site.start_web(port=_port(url))
    worker = site.start_worker()

    log_check = _rollback_noticed(site, url)
    assert log_check["promised_size"] == held.size
    assert log_check["database_size"] < held.size
    assert "gone back" in log_check["detail"]
    payload = open_task_payload(
        open_task_request(title="After the restore", deadline=deadline_in(900))
    )
    headers = _register(url) | {"Idempotency-Key": str(uuid.uuid4())}
    _refused(httpx.post(f"{url}/api/a2a-tasks", json=payload, headers=headers, timeout=10))
    _refused(_contribute(url, kept[0]["task_id"], _register(url)))
    metrics = httpx.get(f"{url}/metrics", timeout=10).text
    assert "cairn_log_rolled_back 1.0" in metrics
    log = worker.log.read_text()
    assert "ERROR" in log and f"the tree of {held.size} entries the site signed" in log

    # Nothing served contradicts what was signed: no checkpoint of another tree, and every tile
    # URL serves its old bytes or nothing.
    time.sleep(3)
    assert _checkpoint_size(url) < held.size
    for path, before in tiles.items():
        answer = httpx.get(f"{url}{path}", timeout=10)
        assert answer.content == before or answer.status_code == 404, path

    after = _new_log(
        site,
        witness,
        url,
        held=held,
        lost_from=dumped.size,
        logged_again=2,
        tiles=tiles,
    )
    _assert_exactly_dropped(url, kept + after, lost, tmp_path)


def _replayed(primary: PrivatePostgres, standby: PrivatePostgres) -> None:
    """Wait until the standby has replayed everything the primary wrote."""
    ((written,),) = primary.sql("SELECT pg_current_wal_lsn()::text")
    give_up = time.monotonic() + 30
    while standby.sql("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", written) != [(True,)]:
        assert time.monotonic() < give_up, "the standby never caught up"
        time.sleep(0.2)


def test_a_failover_to_an_asynchronous_standby_behind_is_caught_and_the_new_log_drops_exactly_the_lost_receipts(
    tmp_path: Path,
):
    if BIN_DIR is None:
        pytest.fail("PostgreSQL's server binaries (initdb, pg_basebackup, pg_ctl) are needed")
    with ExitStack() as stack:
        primary = started(stack, PrivatePostgres())
        primary.create_database(DATABASE)
        standby = started(stack, PrivatePostgres(replica_of=primary))
        witness = _witness(tmp_path, primary)
        stack.callback(witness.deployment.stop_all)
        # Both servers in one URL: Cairn's connections go to whichever takes writes.
        database_url = (
            f"postgres://postgres@/{DATABASE}?host=127.0.0.1,127.0.0.1"
            f"&port={primary.port},{standby.port}&target_session_attrs=read-write"
        )
        site = site_cairn(database_url, primary, witness, tmp_path)
        stack.callback(site.stop_all)
        url = site.web_urls[0]

        kept = _writes(url, 3)
        replicated = wait_cosigned(url, witness, beyond=5)
        tiles = _tiles(url, replicated.size)
        _replayed(primary, standby)
        standby.stream_stopped()
        give_up = time.monotonic() + 30
        while primary.sql("SELECT count(*) FROM pg_stat_replication") != [(0,)]:
            assert time.monotonic() < give_up, "the standby still streams"
            time.sleep(0.2)
        lost = _writes(url, WRITES_LOST)  # answered, receipts issued: on the primary alone
        held = wait_cosigned(url, witness, beyond=replicated.size + 2 * WRITES_LOST - 1)
        tiles |= _tiles(url, held.size)

        primary.kill()
        standby.promote()

        log_check = _rollback_noticed(site, url)
        assert log_check["promised_size"] == held.size
        assert log_check["database_size"] == replicated.size
        _refused(_contribute(url, kept[0]["task_id"], _register(url)))
        assert _checkpoint_size(url) < held.size

        after = _new_log(
            site,
            witness,
            url,
            held=held,
            lost_from=replicated.size,
            logged_again=0,
            tiles=tiles,
        )
        _assert_exactly_dropped(url, kept + after, lost, tmp_path)
