"""SPEC §16.1 across a keyper grace (§15.8): a task whose one report is sealed to the keypers stays
open past its deadline until the keypers release and the worker evaluates it, on the primary. A
streaming replica whose replay was paused before the deadline still holds it open, awaiting its
keys, and the web process keeps reading that replica (`CAIRN_REPLICA_MAX_LAG_S` of an hour).
Every list page, read over and over while replay is paused and after it resumes, never shows the
task open once the primary has evaluated it: a task the replica shows open past its deadline,
awaiting its keys or not, sends the read to the primary (`tasks.due.PAST_DEADLINE`).

The site is a PostgreSQL primary with its replica (`pg_basebackup -R`), one web process, a worker
and `python -m cairn.grpc`; its keypers are two Cairns of their own that witness its log. Every
figure the test measures is printed (run with -s to see them).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import psycopg
import pytest

from core.clock import parse_instant
from ledger.keyper_seal import seal
from tasks.opening import RELEASES_AFTER
from tests.deploy.postgres import BIN_DIR, PrivatePostgres, free_port
from tests.deploy.processes import Deployment, cairn_env
from tests.deploy.test_replicas import (
    DATABASE,
    Cluster,
    Door,
    GrpcDoor,
    doors,
    wait_grpc_serving,
    wait_replica_state,
)
from tests.factories import contribution_report, deadline_in, open_task_payload, open_task_request
from tests.ledger.keyper_processes import KeyperProcess, SiteProcess, start_all

THRESHOLD = 2
# Time enough to post the task, have its entry logged, seal a report to it, send it and see the
# replica receive both, on a busy machine.
DEADLINE_S = 40
# The worker's sweep asks the keypers every minute, and django-q2's scheduler looks at its
# schedules about every 30 s: past the keypers' release time, the evaluation comes well within.
EVALUATED_WITHIN_S = 240
# How often the list pages are read while the primary evaluates, and how many more times once it
# has, with replay paused and again after it resumed.
PACE_S = 0.5
ROUNDS_AFTER = 10


@dataclass
class SealedSite:
    cluster: Cluster
    site: SiteProcess
    keypers: list[KeyperProcess]

    @property
    def web(self) -> str:
        return self.site.url


@pytest.fixture
def sealed_site(tmp_path, migrated_sqlite) -> Iterator[SealedSite]:
    """A primary, its streaming replica and the site's processes on them, listing two keypers
    (both needed to open a report) that witness its log."""
    if BIN_DIR is None:
        pytest.fail("PostgreSQL's server binaries (initdb, pg_basebackup, pg_ctl) are needed")
    primary = PrivatePostgres()
    primary.start()
    primary.wait_ready()
    replica = None
    deployment = None
    keypers: list[KeyperProcess] = []
    try:
        primary.create_database(DATABASE)
        replica = PrivatePostgres(replica_of=primary)
        replica.start()
        replica.wait_ready()
        folders = [tmp_path / name for name in ("keyper-1", "keyper-2", "site", "logs")]
        for folder in folders:
            folder.mkdir()
        keypers = [KeyperProcess(f"keyper {n}", folder) for n, folder in enumerate(folders[:2], 1)]
        site = SiteProcess("site", folders[2])
        for keyper in keypers:
            keyper.configure_for(site)
        start_all(list(keypers), migrated_sqlite)
        grpc_address = f"127.0.0.1:{free_port()}"
        env = cairn_env(
            primary.url(DATABASE),
            CAIRN_SITE_URL=site.url,
            CAIRN_LOG_INTERVAL_S="1",
            DATABASE_REPLICA_URLS=replica.url(DATABASE),
            CAIRN_REPLICA_MAX_LAG_S="3600",
            CAIRN_GRPC_BIND=grpc_address,
            **site.keyper_settings(keypers, threshold=THRESHOLD, quorum=len(keypers)),
        )
        deployment = Deployment(
            broker="orm",
            postgres=primary,
            database_url=primary.url(DATABASE),
            env=env,
            logs=folders[3],
        )
        deployment.manage("migrate", "--noinput")
        deployment.start_web(site.port)
        deployment.start_worker()
        grpc_service = deployment._spawn("grpc", [sys.executable, "-m", "cairn.grpc"])
        wait_grpc_serving(grpc_address, grpc_service)
        wait_replica_state(site.url, "serving")
        yield SealedSite(Cluster(primary, replica, deployment, grpc_address), site, keypers)
    finally:
        if deployment is not None:
            deployment.stop_all()
        for keyper in keypers:
            keyper.stop()
        for server in (replica, primary):
            if server is not None:
                try:
                    server.stop()
                except Exception:
                    pass
                server.remove()


# ---------------------------------------------------------------------------------------------
# The site's clients


def post_task(sealed: SealedSite, http: httpx.Client) -> tuple[str, datetime]:
    payload = open_task_payload(open_task_request(deadline=deadline_in(DEADLINE_S)))
    posted = http.post("/api/a2a-tasks", json=payload, headers=sealed.site.agent())
    assert posted.status_code == 201, posted.text
    view = posted.json()["task"]
    return view["id"], parse_instant(view["deadline"])


def logged_task_entry(http: httpx.Client, task_id: str) -> dict[str, Any]:
    """The task's entry in the site's log, once the worker's sequencer has taken it in."""
    give_up = time.monotonic() + 60
    while True:
        answer = http.get(f"/api/log/tasks/{task_id}")
        if answer.status_code == 200:
            found = [e for e in answer.json()["entries"] if e["entry"]["type"] == "cairn.log/task"]
            if found:
                return found[0]
        assert time.monotonic() < give_up, f"the task's entry was never logged: {answer.text}"
        time.sleep(0.2)


def send_sealed_report(sealed: SealedSite, http: httpx.Client, task_id: str) -> None:
    """A report sealed to the site's keypers, as a careful client seals it, sent by another
    agent."""
    entry = logged_task_entry(http, task_id)
    payload = seal(
        contribution_report(),
        site=sealed.site.origin,
        task_id=task_id,
        task_entry=entry["index"],
        deadline=entry["entry"]["deadline"],
        keypers=[keyper.keyper for keyper in sealed.keypers],
        threshold=THRESHOLD,
    )
    sent = http.post(
        f"/api/a2a-tasks/{task_id}/contributions", json=payload, headers=sealed.site.agent()
    )
    assert sent.status_code == 201, sent.text
    assert sent.json()["receipt"]["sealed"] == "keypers"


# ---------------------------------------------------------------------------------------------
# The list pages


def _feed_state(text: str, task_id: str) -> str:
    """The state the feed's card of the task shows, or "absent" when it has none."""
    marker = f'aria-labelledby="task-{task_id}"'
    if marker not in text:
        return "absent"
    card = text.split(marker, 1)[1].split("</article>", 1)[0]
    return "open" if 'class="badge badge-open"' in card else "evaluated"


def _feed(path: str, task_id: str) -> Door:
    return Door(
        f"web feed {path}",
        lambda client, url: client.get(f"{url}{path}"),
        lambda answer: _feed_state(answer.text, task_id),
    )


def list_pages(task_id: str, grpc_address: str) -> list[tuple[Door | GrpcDoor, str]]:
    """Every list page that shows the task, with what it must show once the task is evaluated:
    each A2A ListTasks, the HTTP route's list and the feed its card evaluated; the feed of open
    tasks no card of it."""
    lists = [door for door in doors(task_id, grpc_address) if "list" in door.name.lower()]
    return [
        *[(door, "evaluated") for door in lists],
        (_feed("/a2a", task_id), "evaluated"),
        (_feed("/a2a?mode=open", task_id), "absent"),
    ]


@dataclass(frozen=True)
class ListRead:
    door: str
    replay: str  # "paused" or "resumed"
    primary_evaluated: bool  # the primary had evaluated the task before the read was sent
    settled: str  # what the page must show once the primary has evaluated the task
    status: int | str
    state: str


def read_lists(
    sealed: SealedSite, task_id: str, *, replay: str, primary_evaluated: bool
) -> list[ListRead]:
    found = []
    with httpx.Client(timeout=15) as client:
        for door, settled in list_pages(task_id, sealed.cluster.grpc_address):
            status, state = door.read(client, sealed.web)
            found.append(ListRead(door.name, replay, primary_evaluated, settled, status, state))
    return found


def evaluated_on(sealed: SealedSite, which: str, task_id: str) -> bool:
    """Whether `which` server holds the task evaluated. A standby replaying the WAL it was held
    from may cancel this probe for a conflict with recovery, or end its connection for one (the
    client may then see only the connection closed): not yet. A standby that is down refuses the
    next probe's connection, which is raised."""
    server = sealed.cluster.primary if which == "primary" else sealed.cluster.replica
    try:
        rows = sealed.cluster.on(server, "SELECT status FROM tasks_task WHERE id = %s", task_id)
    except psycopg.OperationalError as error:
        conflict = any(
            sign in str(error) for sign in ("conflict with recovery", "closed the connection")
        )
        if which == "primary" or not conflict:
            raise
        return False
    return bool(rows) and rows[0][0] != "working"


# ---------------------------------------------------------------------------------------------
# The test


def test_no_list_page_shows_a_keyper_sealed_task_open_once_the_primary_evaluated_it(sealed_site):
    sealed = sealed_site
    cluster = sealed.cluster
    with httpx.Client(base_url=sealed.web, timeout=20) as http:
        task_id, deadline = post_task(sealed, http)
        send_sealed_report(sealed, http, task_id)

    # The replica holds the task and its door's copy awaiting the keys; then its replay pauses,
    # before the deadline
    give_up = time.monotonic() + 30
    awaiting = (
        "SELECT t.keys_pending AND f.keys_pending FROM tasks_task t "
        "JOIN a2a_gateway_taskform f ON f.task_id = t.id WHERE t.id = %s"
    )
    while cluster.on(cluster.replica, awaiting, task_id) != [(True,)]:
        assert time.monotonic() < give_up, "the replica never received the sealed report"
        time.sleep(0.1)
    before = read_lists(sealed, task_id, replay="streaming", primary_evaluated=False)
    assert {(read.status, read.state) for read in before} == {(200, "open")}, before
    assert datetime.now(UTC) < deadline, "too slow: the deadline passed before replay paused"
    cluster.on(cluster.replica, "SELECT pg_wal_replay_pause()")

    reads: list[ListRead] = []
    try:
        # Past the deadline the keypers release, and the worker evaluates the task on the primary
        give_up = time.monotonic() + (deadline - datetime.now(UTC)).total_seconds()
        give_up += RELEASES_AFTER.total_seconds() + EVALUATED_WITHIN_S
        while not evaluated_on(sealed, "primary", task_id):
            reads += read_lists(sealed, task_id, replay="paused", primary_evaluated=False)
            assert time.monotonic() < give_up, "never evaluated\n" + cluster.deployment.tails()
            time.sleep(PACE_S)
        for _ in range(ROUNDS_AFTER):
            reads += read_lists(sealed, task_id, replay="paused", primary_evaluated=True)

        # All the while the replica shows the task open past its deadline, awaiting its keys, and
        # the web process reads it: what keeps the pages right is the routing, not a skipped
        # replica
        (held,) = cluster.on(
            cluster.replica,
            "SELECT status, keys_pending, deadline < now() FROM tasks_task WHERE id = %s",
            task_id,
        )
        assert held == ("working", True, True), held
        wait_replica_state(sealed.web, "serving")
    finally:
        cluster.resume_replay()

    give_up = time.monotonic() + 30
    while not evaluated_on(sealed, "replica", task_id):
        reads += read_lists(sealed, task_id, replay="resumed", primary_evaluated=True)
        assert time.monotonic() < give_up, "the replica never replayed the evaluation"
        time.sleep(PACE_S)
    for _ in range(ROUNDS_AFTER):
        reads += read_lists(sealed, task_id, replay="resumed", primary_evaluated=True)

    failed = [read for read in reads if read.status != 200]
    assert not failed, failed
    after = [read for read in reads if read.primary_evaluated]
    paused_after = [read for read in after if read.replay == "paused"]
    assert paused_after, "no list page was read with replay paused after the evaluation"
    wrong = [read for read in after if read.state != read.settled]
    assert not wrong, f"once the primary evaluated the task, a list page showed {wrong}"

    # The keypers released: the evaluation waited for them, and opened the report with both
    (evaluated_at,) = cluster.on(
        cluster.primary, "SELECT evaluated_at FROM tasks_task WHERE id = %s", task_id
    )[0]
    assert (evaluated_at - deadline) >= RELEASES_AFTER
    view = httpx.get(f"{sealed.web}/api/a2a-tasks/{task_id}", timeout=20).json()
    (item,) = view["evaluation"]["contributions"]
    released = [release["keyper"] for release in item["sealed"]["releases"]]
    assert sorted(released) == sorted(keyper.name for keyper in sealed.keypers), item
    assert "report" in item, item
    print(
        f"\n{len(reads)} list reads past the pause: {len(after)} after the primary evaluated the "
        f"task {(evaluated_at - deadline).total_seconds():.1f} s past its deadline, "
        f"{len(paused_after)} of them with replay paused"
    )
