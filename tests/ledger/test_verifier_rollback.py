"""SPEC §16.2's last rule: a site whose log went back in time (a restore from an older backup, a
standby promoted while behind) and then signed a different history is reported as a rollback,
with both signed notes, before anything the rollback explains: the entries that then seem late,
missing or altered."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ledger.models import Checkpoint, Leaf
from ledger.services import log_sequence
from ledger.witnesses import witnesses_cosign
from tests.ledger.keeper import log_rolled_back


def sequenced_and_witnessed() -> None:
    log_sequence()
    witnesses_cosign()


@pytest.mark.parametrize("entries_after", [1, 5], ids=["a smaller tree", "a larger tree"])
def test_a_rolled_back_log_is_reported_as_a_rollback_first(
    settings, witnessed, verify, poster, post_task, time_machine, raised_caps, entries_after
):
    witnessed()
    task = post_task(poster)
    post_task(poster)
    sequenced_and_witnessed()  # a witnessed checkpoint of 2 entries, which the rollback keeps
    post_task(poster)
    post_task(poster)
    sequenced_and_witnessed()
    kept = verify("monitor")
    assert kept.returncode == 0, kept.stdout
    size = Leaf.objects.count()
    kept_note = Checkpoint.objects.get(tree_size=size).note

    log_rolled_back(2)
    # The keeper forgets what the site signed too, or the site would sign nothing that goes back.
    settings.CAIRN_LOG_STATE.unlink()
    # Different entries take the lost indexes, dated long enough ago that a quorum of witnesses
    # should have cosigned them by now: the witnesses refuse the different tree, so none has.
    time_machine.move_to(datetime.now(UTC) - timedelta(seconds=200), tick=True)
    for _ in range(entries_after):
        post_task(poster)
    sequenced_and_witnessed()
    latest = Checkpoint.objects.order_by("-id").first()
    assert latest is not None and latest.tree_size == 2 + entries_after

    runs = {"task": verify("task", str(task.id)), "monitor": verify("monitor")}

    for command, checked in runs.items():
        assert checked.returncode == 1, (command, checked.stdout)
        failures = [line for line in checked.stdout.splitlines() if line.startswith("FAIL")]
        assert failures[0].startswith(
            f"FAIL  ROLLBACK: the site signed a tree of {size} entries, then a tree of "
            f"{2 + entries_after} entries that does not extend it"
        ), (command, checked.stdout)
        for note in (kept_note, latest.note):
            assert all(f"      {line}" in checked.stdout for line in note.strip().split("\n"))
        assert checked.stdout.index(f"\n      {size}\n") < checked.stdout.index(
            f"\n      {latest.tree_size}\n"
        )
        assert "should be under a witnessed checkpoint" not in checked.stdout
