"""SPEC §16.2's failover without loss, as docs/deployment.md's "High availability" prints it: a
PostgreSQL primary and a standby copied from it by the docs' `pg_basebackup` block, made
synchronous by the docs' `ALTER SYSTEM` block (`ANY 1 (standby1, standby2)`); Cairn's web process
and worker on libpq's multi-host URL naming both, with `target_session_attrs=read-write`; a second
Cairn witnessing the site's log; a load of task posts and contributions keeping every receipt.
Mid-load the primary's WAL sender is stopped, so the standby falls behind, then the primary is
killed (SIGKILL, every process of it) and the standby promoted by the docs' block; the dead
primary's address is rebuilt as a standby of the new primary, and the same again; and a third
time at the moment that matters most to the log: the standby stops receiving while the worker's
sequencer is in a run (entries appended and a checkpoint signed, the commit waiting for the
standby), and the primary is killed then. Writes resume each time without a restart of Cairn,
every task and receipt answered is in the log, and the witness cosigns the checkpoints after the
failovers, which extend those before them. Every figure is printed (run with -s to see them).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import psycopg
import pytest

from ledger.services import SEQUENCER_LOCK
from tests.deploy.failover import (
    DATABASE,
    Load,
    assert_all_logged,
    assert_extends,
    assert_never_rolled_back,
    checkpoint,
    run_block,
    site_cairn,
    started,
    wait_cosigned,
    witness_cairn,
)
from tests.deploy.postgres import BIN_DIR, PrivatePostgres
from tests.docs import doc_block

DOCS = "docs/deployment.md"
STANDBY_BLOCK = "application_name=standby1"
SYNCHRONOUS_BLOCK = "synchronous_standby_names"
PROMOTE_BLOCK = "pg_promote()"
# How long the primary's WAL sender is stopped before the primary is killed.
STANDBY_BEHIND_S = 3
# Receipts kept before the primary is killed, and after the promotion.
RECEIPTS_EACH_SIDE = 150


@pytest.fixture
def servers() -> Iterator[ExitStack]:
    if BIN_DIR is None:
        pytest.fail("PostgreSQL's server binaries (initdb, pg_basebackup, pg_ctl) are needed")
    with ExitStack() as stack:
        yield stack


def _wait_replication(primary: PrivatePostgres, column: str, value: str) -> None:
    """Until `primary`'s `pg_stat_replication` shows `value` in `column` for standby1."""
    give_up = time.monotonic() + 30
    query = f"SELECT {column} FROM pg_stat_replication WHERE application_name = 'standby1'"
    while (found := primary.sql(query)) != [(value,)]:
        assert time.monotonic() < give_up, f"standby1's {column} is {found}, never {value}"
        time.sleep(0.2)


def _synchronous_standby(
    stack: ExitStack, primary: PrivatePostgres, port: int | None = None
) -> PrivatePostgres:
    """A standby of `primary` made by the docs' block, then made synchronous by the docs' other
    block; on `port` (a dead server's, rebuilt as a standby) or a free one."""

    def copied(data: Path) -> None:
        block = doc_block(DOCS, STANDBY_BLOCK)
        run_block(block, primary, PRIMARY="127.0.0.1", PGDATA=str(data))

    standby = started(stack, PrivatePostgres(made_by=copied, port=port))
    _wait_replication(primary, "state", "streaming")
    run_block(doc_block(DOCS, SYNCHRONOUS_BLOCK), primary)
    # `ANY 1 (...)` makes each named standby a candidate of the quorum, once the reload is read.
    _wait_replication(primary, "sync_state", "quorum")
    return standby


def _behind_for_a_while(primary: PrivatePostgres, sender: int) -> tuple[float, str]:
    """The standby receives nothing for `STANDBY_BEHIND_S` seconds: when it stopped receiving,
    and the moment said."""
    os.kill(sender, signal.SIGSTOP)
    stopped_at = time.monotonic()
    time.sleep(STANDBY_BEHIND_S)
    return stopped_at, f"the standby had received nothing for {STANDBY_BEHIND_S} s"


def _behind_mid_sequencer(primary: PrivatePostgres, sender: int) -> tuple[float, str]:
    """The standby stops receiving while a sequencer run holds its lock (its entries appended,
    its checkpoint signed, in a transaction not yet committed), and until that run's commit waits
    for the standby: the moment its work is on the primary alone. When the run ends first (it
    had nothing to write, or had committed), the standby catches up and the next run is
    waited for. Returns when the standby stopped receiving, and the moment said."""
    held = (
        "SELECT l.pid, a.wait_event, a.query FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
        " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
        " AND l.classid = %s AND l.objid = %s"
    )
    key = [(SEQUENCER_LOCK >> 32) & 0xFFFFFFFF, SEQUENCER_LOCK & 0xFFFFFFFF]
    give_up = time.monotonic() + 120
    with psycopg.connect(primary.url(DATABASE), autocommit=True) as conn:
        while True:
            assert time.monotonic() < give_up, "no sequencer run was caught committing"
            running = conn.execute(held, key).fetchall()
            if not running:
                time.sleep(0.01)
                continue
            os.kill(sender, signal.SIGSTOP)
            stopped_at = time.monotonic()
            ((pid, _, _),) = running
            while (run := conn.execute(f"{held} AND l.pid = %s", [*key, pid]).fetchall()) and (
                run[0][1] != "SyncRep"
            ):
                time.sleep(0.01)
            if run:
                return stopped_at, (
                    f"the sequencer's run was at `{run[0][2]}`, waiting for the standby"
                )
            os.kill(sender, signal.SIGCONT)


def _fail_over(
    load: Load,
    primary: PrivatePostgres,
    standby: PrivatePostgres,
    round: int,
    behind: Callable[[PrivatePostgres, int], tuple[float, str]] = _behind_for_a_while,
) -> None:
    """Mid-load: the standby falls behind (the primary's WAL sender stops sending, as a network
    would, for as long as `behind` says), the primary is killed, the standby promoted; until
    writes are answered again and as many receipts again are kept."""
    load.wait_receipts(len(load.receipts) + RECEIPTS_EACH_SIDE)
    ((sender,),) = primary.sql(
        "SELECT pid FROM pg_stat_replication WHERE application_name = 'standby1'"
    )
    stopped_at, moment = behind(primary, sender)
    answered_while_behind = len([at for at in load.answered_at if at > stopped_at])
    primary.kill()
    killed_at = time.monotonic()
    answered_before = len(load.receipts)
    run_block(doc_block(DOCS, PROMOTE_BLOCK), standby)
    promoted_at = time.monotonic()
    resumed_at = load.first_answer_after(promoted_at)
    assert standby.sql("SELECT pg_is_in_recovery()") == [(False,)]
    print(
        f"\nfailover {round}: {answered_before} receipts before the kill, when {moment}; "
        f"{answered_while_behind} writes answered in the {killed_at - stopped_at:.1f} s before "
        f"it; promoted {promoted_at - killed_at:.1f} s after the kill, writes answered again "
        f"{resumed_at - promoted_at:.1f} s after the promotion"
    )
    load.wait_receipts(answered_before + RECEIPTS_EACH_SIDE)


def test_a_synchronous_standby_promoted_mid_load_keeps_every_receipt(servers, tmp_path):
    first = started(servers, PrivatePostgres())
    first.sql("CREATE ROLE replicator WITH REPLICATION LOGIN")
    first.create_database(DATABASE)
    second = _synchronous_standby(servers, first)

    witness = witness_cairn(tmp_path, first)
    servers.callback(witness.deployment.stop_all)
    url = (
        f"postgres://postgres@127.0.0.1:{first.port},127.0.0.1:{second.port}/{DATABASE}"
        "?target_session_attrs=read-write"
    )
    site = site_cairn(url, first, witness, tmp_path)
    servers.callback(site.stop_all)
    web = site.web_urls[0]

    witnessed = []
    with Load(web) as load:
        witnessed.append(wait_cosigned(web, witness, beyond=0))
        _fail_over(load, first, second, 1)
        # The dead primary's host is rebuilt as a standby of the new one, at the same address,
        # which the URL already names: the next failover goes back to it.
        third = _synchronous_standby(servers, second, port=first.port)
        witnessed.append(wait_cosigned(web, witness, beyond=witnessed[-1].size))
        _fail_over(load, second, third, 2)
        fourth = _synchronous_standby(servers, third, port=second.port)
        witnessed.append(wait_cosigned(web, witness, beyond=witnessed[-1].size))
        _fail_over(load, third, fourth, 3, behind=_behind_mid_sequencer)
    print(
        f"{len(load.receipts)} receipts, {len(load.tasks)} tasks; other answers {dict(load.other)}"
    )
    server_errors = {status for status in load.other if status.startswith("5") and status != "503"}
    assert not server_errors, f"{dict(load.other)}\n{site.tails()}"

    assert_all_logged(web, load.tasks, load.receipts)
    witnessed.append(wait_cosigned(web, witness, beyond=checkpoint(web, witness).size - 1))
    for earlier in witnessed[:-1]:
        assert_extends(web, earlier, witnessed[-1])
    assert_never_rolled_back(web)
    print(
        f"witnessed checkpoints of sizes {[c.size for c in witnessed]}: the last, after every "
        "failover, extends each before"
    )
