"""SPEC §15.3–§15.5 with real witness processes (quorum 2 of 3): the attacks only witnesses can
catch. A keeper who inserts a contribution after the deadline and back-dates it, or who rewrites
or truncates its history and re-signs it, is caught by a verifier that has never seen the log
before, because no quorum of witnesses will vouch for the story in time."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import rfc8785

from ledger.models import Leaf
from ledger.services import log_sequence
from ledger.witnesses import witnesses_cosign
from tasks.evaluation import task_evaluate
from tasks.models import Task
from tests.factories import deadline_in, open_task_payload, open_task_request
from tests.ledger.keeper import contribution_forged, history_rebuilt


def sequenced_and_witnessed() -> None:
    log_sequence()
    witnesses_cosign()


def test_a_contribution_inserted_after_the_deadline_and_back_dated_is_caught(
    witnessed, verify, poster, post_task, make_agent, time_machine, short_deadlines
):
    witnessed()
    # The task was posted a few minutes ago, with a two-minute deadline now passed.
    time_machine.move_to(datetime.now(UTC) - timedelta(seconds=200), tick=True)
    task = post_task(poster, open_task_payload(open_task_request(deadline=deadline_in(120))))
    sequenced_and_witnessed()
    assert verify("task", str(task.id)).returncode == 0, "open, honest, no contribution yet"
    time_machine.move_to(task.deadline + timedelta(seconds=1), tick=True)

    # After the deadline, the keeper adds two contributions dated 15 s before it, then evaluates.
    for _ in range(2):
        contribution_forged(task, make_agent().agent, task.deadline - timedelta(seconds=15))
    task_evaluate(task_id=task.pk)
    sequenced_and_witnessed()
    assert Task.objects.get(pk=task.pk).outcome == "resolved", "an unresolved task made resolved"

    checked = verify("task", str(task.id))

    assert checked.returncode == 1, checked.stdout
    assert checked.stdout.count("it was inserted late and back-dated") == 2, checked.stdout
    assert "ok    outcome and verdict recomputed by cairn.rules/0.1" in checked.stdout
    assert "no witnesses are pinned" not in checked.stdout


def test_a_history_rewritten_and_re_signed_is_caught_by_a_verifier_that_never_saw_the_log(
    witnessed, verify, evaluated
):
    witnessed()
    sequenced_and_witnessed()
    leaves = [leaf.entry for leaf in Leaf.objects.order_by("index")]
    entry = json.loads(leaves[1]) | {"commitment": "sha256:" + "0" * 64}
    leaves[1] = rfc8785.dumps(entry).decode()
    history_rebuilt(leaves)  # every checkpoint the witnesses saw is gone from the site
    sequenced_and_witnessed()

    checked = verify("log")

    assert checked.returncode == 1, checked.stdout
    assert "carries 0 of the 2 cosignatures required" in checked.stdout
    assert "no checkpoint of the log carries the witness quorum yet" in checked.stdout


def test_a_history_rewritten_beside_the_witnessed_checkpoints_shows_its_seams(
    witnessed, verify, evaluated
):
    task, _ = evaluated
    witnessed()
    sequenced_and_witnessed()
    leaves = [leaf.entry for leaf in Leaf.objects.order_by("index")]
    # A contribution entry taken out and the tree re-signed, the witnessed checkpoints left as
    # they were: the witnesses refuse the new tree, and the old one no longer matches the log.
    history_rebuilt(leaves[:1] + leaves[2:], checkpoints_kept=True)
    sequenced_and_witnessed()

    checked = verify("task", str(task.id))

    assert checked.returncode == 1, checked.stdout
    assert "carries 0 of the 2 cosignatures required" in checked.stdout
    assert "the log shrank from 4 to 3 entries" in checked.stdout


def test_a_truncated_history_is_caught_by_a_verifier_that_never_saw_the_log(
    witnessed, verify, evaluated
):
    witnessed()
    sequenced_and_witnessed()
    leaves = [leaf.entry for leaf in Leaf.objects.order_by("index")]
    history_rebuilt(leaves[:2])
    sequenced_and_witnessed()

    checked = verify("log")

    assert checked.returncode == 1, checked.stdout
    assert "no checkpoint of the log carries the witness quorum yet" in checked.stdout
