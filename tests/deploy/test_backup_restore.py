"""SPEC §16.2's backups, as docs/deployment.md's "Backups and restores" prints them: WAL archiving
turned on by the docs' block on a private primary, Cairn's web process and worker on it with a
second Cairn witnessing the log, and a load of task posts and contributions keeping every receipt;
a base backup by the docs' block under load, more receipts after it, then the server killed
(SIGKILL, every process of it) and restored by the docs' block into a new data directory, on the
same address. Every task and receipt answered is in the log afterwards, and Cairn, with the same
keys and log state file and no restart, takes writes again and signs checkpoints that extend the
one before the kill, cosigned by its witness. Every figure is printed (run with -s to see them).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from tests.deploy.failover import (
    DATABASE,
    Load,
    assert_all_logged,
    assert_extends,
    assert_never_rolled_back,
    checkpoint,
    postgres_folder,
    run_block,
    site_cairn,
    started,
    wait_cosigned,
    witness_cairn,
)
from tests.deploy.postgres import BIN_DIR, PrivatePostgres
from tests.docs import doc_block

DOCS = "docs/deployment.md"
ARCHIVING_BLOCK = "archive_command"
BASE_BACKUP_BLOCK = 'pg_basebackup -D "$ARCHIVE/base/'
RESTORE_BLOCK = "recovery.signal"
# Receipts kept before the base backup, between it and the kill, and after the restore.
RECEIPTS_EACH_STEP = 100


@pytest.fixture
def cleanup() -> Iterator[ExitStack]:
    if BIN_DIR is None:
        pytest.fail("PostgreSQL's server binaries (initdb, pg_basebackup, pg_ctl) are needed")
    with ExitStack() as stack:
        yield stack


def _wait_writable(server: PrivatePostgres, within_s: float = 60) -> None:
    """Until the restored server has replayed the archive to its end and takes writes."""
    give_up = time.monotonic() + within_s
    while server.sql("SELECT pg_is_in_recovery()") != [(False,)]:
        assert time.monotonic() < give_up, f"still recovering\n{server.log.read_text()[-3000:]}"
        time.sleep(0.2)


def test_a_base_backup_and_the_wal_archive_restore_every_receipt(cleanup, tmp_path):
    primary = started(cleanup, PrivatePostgres())
    archive = postgres_folder()
    cleanup.callback(shutil.rmtree, archive, ignore_errors=True)
    run_block(doc_block(DOCS, ARCHIVING_BLOCK), primary, ARCHIVE=str(archive))
    primary.stop()
    primary.start()
    primary.wait_ready()
    assert primary.sql("SHOW archive_mode") == [("on",)]
    primary.create_database(DATABASE)

    witness = witness_cairn(tmp_path, primary)
    cleanup.callback(witness.deployment.stop_all)
    site = site_cairn(primary.url(DATABASE), primary, witness, tmp_path)
    cleanup.callback(site.stop_all)
    web = site.web_urls[0]

    with Load(web) as load:
        load.wait_receipts(RECEIPTS_EACH_STEP)
        run_block(doc_block(DOCS, BASE_BACKUP_BLOCK), primary, ARCHIVE=str(archive))
        at_backup = len(load.receipts)
        load.wait_receipts(at_backup + RECEIPTS_EACH_STEP)
        before = wait_cosigned(web, witness, beyond=0)
        primary.kill()
    tasks, receipts = list(load.tasks), list(load.receipts)
    archived = sorted(path.name for path in archive.iterdir() if path.is_file())

    def restored_into(data):
        variables = {"PGDATA": str(data), "ARCHIVE": str(archive), "OLD_PGDATA": str(primary.data)}
        run_block(doc_block(DOCS, RESTORE_BLOCK), primary, **variables)

    restored = started(cleanup, PrivatePostgres(made_by=restored_into, port=primary.port))
    _wait_writable(restored)
    print(
        f"\nrestore: {at_backup} receipts before the base backup, {len(receipts)} in all, "
        f"{len(tasks)} tasks; {len(archived)} files in the archive at the kill; "
        f"witnessed checkpoint of {before.size} entries before it"
    )
    assert_all_logged(web, tasks, receipts)

    with Load(web) as after_restore:
        after_restore.wait_receipts(RECEIPTS_EACH_STEP)
    assert_all_logged(web, tasks + after_restore.tasks, receipts + after_restore.receipts)
    after = wait_cosigned(web, witness, beyond=checkpoint(web, witness).size - 1)
    assert after.size > before.size
    assert_extends(web, before, after)
    assert_never_rolled_back(web)
    print(
        f"after the restore: {len(after_restore.receipts)} more receipts, other answers "
        f"{dict(after_restore.other)}; witnessed checkpoint of {after.size} entries, extending "
        "the one before the kill"
    )
