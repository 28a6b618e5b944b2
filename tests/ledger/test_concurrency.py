"""The log under real concurrency (PostgreSQL): racing writers in two processes, two sequencers."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
import rfc8785
from django.db import connection

from core.clock import format_instant
from ledger.logs import log_first
from ledger.merkle import leaf_hash
from ledger.models import Checkpoint, Leaf, QueuedEntry
from ledger.selectors import consistency_proof
from ledger.services import log_queue, log_sequence
from tasks.models import Task
from tests.conftest import postgres_only
from tests.core.test_concurrency import race
from tests.ledger.conftest import load_verifier
from tests.ledger.test_log import mth

pytestmark = [postgres_only(), pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
verifier = load_verifier()


def _database_url() -> str:
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def _signed_checkpoints(http, tmp_path) -> list[tuple[int, bytes]]:
    """Every checkpoint published, each after its signature verified with the published key."""
    site = verifier.Site(str(http.base_url), tmp_path)
    checked = [site.checkpoint(c.note) for c in Checkpoint.objects.order_by("id")]
    return [(c.size, c.root) for c in checked]


def test_fifty_writes_racing_through_two_processes_are_logged_once_each_in_one_order(
    http, tmp_path
):
    env = {**os.environ, "DATABASE_URL": _database_url()}
    racers = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.ledger.racer", "25", f"203.0.{lane}"],
            cwd=ROOT,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for lane in (1, 2)
    ]
    for racer in racers:
        _, errors = racer.communicate(timeout=300)
        assert racer.returncode == 0, errors
    log_sequence()

    leaves = list(Leaf.objects.order_by("index"))
    assert Task.objects.count() == 50 and not QueuedEntry.objects.exists()
    assert [leaf.index for leaf in leaves] == list(range(50))
    assert len({leaf.entry for leaf in leaves}) == 50
    assert {leaf.entry for leaf in leaves} == {
        rfc8785.dumps(
            {
                "type": "cairn.log/task",
                "task_id": str(task.id),
                "public_input_digest": task.public_input_digest,
                "deadline": task.deadline_text,
                "created_at": format_instant(task.created_at),
            }
        ).decode()
        for task in Task.objects.all()
    }
    hashes = [leaf_hash(leaf.entry.encode()) for leaf in leaves]
    checkpoints = _signed_checkpoints(http, tmp_path)
    assert checkpoints[-1] == (50, mth(hashes))
    for (first, first_root), (second, second_root) in itertools.pairwise(checkpoints):
        assert first < second
        assert mth(hashes[:first]) == first_root
        path = [
            bytes.fromhex(h) for h in consistency_proof(first=first, second=second, log=log_first())
        ]
        verifier.check_consistency(first, second, first_root, second_root, path)


def test_two_sequencers_at_once_append_nothing_twice():
    log_queue({"type": "test", "n": n} for n in range(300))

    appended = race(2, lambda i: log_sequence(batch_size=7))

    assert sum(appended) == 300
    leaves = list(Leaf.objects.order_by("index"))
    assert [leaf.index for leaf in leaves] == list(range(300))
    assert [rfc8785.dumps({"type": "test", "n": n}).decode() for n in range(300)] == [
        leaf.entry for leaf in leaves
    ]
    latest = Checkpoint.objects.order_by("-id").first()
    assert (latest.tree_size, latest.root_hash) == (
        300,
        mth([leaf_hash(leaf.entry.encode()) for leaf in leaves]).hex(),
    )
