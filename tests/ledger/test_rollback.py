"""SPEC §16.2: the site never signs a history that goes back. What it signed and what its witnesses
hold outlive the database's rows; a log that does not extend them is signed no further, and every
write that would log an entry is refused, saying why."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from core.errors import ErrorCode, Refusal
from ledger import log_state
from ledger.jobs import sequence_log
from ledger.models import Checkpoint, Leaf
from ledger.services import log_queue, log_sequence
from tasks.evaluation import task_evaluate, tasks_evaluate_due
from tasks.models import Task, TaskStatus
from tests.ledger.keeper import log_rolled_back


def _grown(count: int, tag: str) -> None:
    log_queue({"type": "test", "tag": tag, "n": n} for n in range(count))
    log_sequence()


@pytest.mark.django_db
def test_a_log_that_lost_signed_entries_is_signed_no_further_and_refuses_writes(
    caplog, poster, post_task
):
    due = post_task(poster)
    Task.objects.filter(pk=due.pk).update(deadline=timezone.now() - timedelta(seconds=1))
    _grown(9, "before")
    assert Checkpoint.objects.latest().tree_size == 10
    log_rolled_back(6)
    signed = list(Checkpoint.objects.values_list("tree_size", "root_hash"))

    # More entries than were lost: a tree as large, over a different history.
    with caplog.at_level(logging.ERROR, logger="ledger.services"):
        _grown(7, "after")

    assert list(Checkpoint.objects.values_list("tree_size", "root_hash")) == signed
    assert Leaf.objects.count() == 6, "the batch that does not extend the signed tree is undone"
    assert "holds 13 entries, which do not extend the tree of 10 entries the site signed" in (
        caplog.text
    )
    rollback = log_state.rollback_found()
    assert rollback is not None and rollback.promised_size == 10
    with pytest.raises(Refusal) as refused:
        post_task(poster)
    assert refused.value.code == ErrorCode.UNAVAILABLE
    assert "gone back" in refused.value.message
    # An evaluation is final and the lost rows may hold receipted contributions: it waits.
    assert tasks_evaluate_due() == 0
    assert task_evaluate(task_id=due.pk) is False
    assert Task.objects.get(pk=due.pk).status == TaskStatus.WORKING


@pytest.mark.django_db
def test_a_log_that_extends_what_it_signed_carries_on():
    _grown(5, "first")
    _grown(3, "second")

    assert Checkpoint.objects.latest().tree_size == 8
    assert log_state.rollback_found() is None


def _witnessed_then_forgotten(witnessed) -> list:
    """Eight entries cosigned by three witnesses; then the database goes back to four and the
    site's own state is lost with it: only the witnesses remember."""
    witnesses = witnessed()
    _grown(8, "witnessed")
    sequence_log()
    assert all(w.cosigned_size() == 8 for w in witnesses)
    log_rolled_back(4)
    settings.CAIRN_LOG_STATE.unlink()
    return witnesses


@pytest.mark.django_db(transaction=True)
def test_a_witness_holding_a_larger_tree_stops_a_site_that_lost_its_own_state(witnessed, caplog):
    witnesses = _witnessed_then_forgotten(witnessed)
    _grown(2, "forked")
    sequence_log()  # the witnesses refuse it, naming the size they hold

    with caplog.at_level(logging.ERROR, logger="ledger.services"):
        _grown(1, "more")

    rollback = log_state.rollback_found()
    assert rollback is not None
    assert (rollback.database_size, rollback.promised_size) == (7, 8)
    assert rollback.promised_by in {w.name for w in witnesses}
    assert "holds 7 entries, which do not extend the tree of 8 entries" in caplog.text
    assert not Checkpoint.objects.filter(tree_size__gt=6).exists()
    assert set(log_state.witness_refusals()) == {w.name for w in witnesses}
    assert all(w.cosigned_size() == 8 for w in witnesses)


@pytest.mark.django_db(transaction=True)
def test_a_witness_refusing_the_proof_from_its_own_size_stops_the_site(witnessed):
    witnesses = _witnessed_then_forgotten(witnessed)
    _grown(6, "past the witnesses")
    sequence_log()  # from the size each names, the proof of our tree fails: theirs differs

    _grown(1, "more")

    rollback = log_state.rollback_found()
    assert rollback is not None and rollback.promised_size == 8
    assert not Checkpoint.objects.filter(tree_size__gt=10).exists()
    assert all(w.cosigned_size() == 8 for w in witnesses)
