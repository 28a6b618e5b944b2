"""SPEC §15.5: an entry fails only once its maximum merge delay (60 s) has passed. Run within
seconds of an evaluation, the verifier says the entry is not yet witnessed and when to run again,
and exits 75 (not verified yet, nothing failed); past the delay, the same gap fails."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ledger.services import log_sequence
from tasks.evaluation import task_evaluate
from tests.factories import deadline_in, open_task_payload, open_task_request


@pytest.mark.parametrize(
    ("evaluated_ago", "status", "said"),
    [
        (0, 75, "is not yet witnessed; run again after"),
        (70, 1, "FAIL  the task's evaluation entry is not in the log"),
    ],
    ids=["within the merge delay", "past it"],
)
def test_an_evaluation_entry_not_yet_logged_fails_only_past_the_merge_delay(
    verify,
    poster,
    post_task,
    make_agent,
    contribute,
    time_machine,
    short_deadlines,
    evaluated_ago,
    status,
    said,
):
    now = datetime.now(UTC)
    time_machine.move_to(now - timedelta(seconds=200), tick=True)
    task = post_task(poster, open_task_payload(open_task_request(deadline=deadline_in(100))))
    contribute(make_agent(), task)
    log_sequence()
    time_machine.move_to(now - timedelta(seconds=evaluated_ago), tick=True)
    task_evaluate(task_id=task.pk)  # its entry queued, not yet sequenced

    checked = verify("task", str(task.id))

    assert checked.returncode == status, checked.stdout
    assert said in checked.stdout
    if status == 75:
        assert "FAIL" not in checked.stdout
        assert "NOT YET VERIFIED: nothing failed" in checked.stdout


def test_without_witnesses_it_names_what_it_checked_and_counts_one_entry(verify, poster, post_task):
    post_task(poster)
    log_sequence()
    assert verify("monitor").returncode == 0
    post_task(poster)
    log_sequence()

    checked = verify("monitor")

    assert checked.returncode == 0, checked.stdout
    assert "no witnesses are pinned" in checked.stdout
    assert "witnessed checkpoint" not in checked.stdout
    assert "ok    the site's signature on its latest checkpoint" in checked.stdout
    assert "ok    1 new entry read, 2 in all" in checked.stdout
