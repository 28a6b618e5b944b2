"""SPEC §16.2: the verifier and the monitor follow the chain of logs. After the database lost
entries and `manage.py log_restart` started a new log, a receipt whose entry was lost is reported
as dropped by the site, with its proof; every other receipt verifies, in the old log or the new;
the loss is said plainly and is not a failure; a restart entry whose previous checkpoint the site
did not sign fails."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from core.canonical import canonical_json
from ledger import log_state
from ledger.jobs import sequence_log
from ledger.logs import log_first, origin_numbered
from ledger.models import QueuedEntry
from ledger.notes import log_origin
from ledger.selectors import entries_range
from tests.ledger.keeper import log_rolled_back


def _restarted(witnesses) -> None:
    for witness in witnesses:  # their operators follow the new origin, as the command asks
        witness.stop()
        witness.start(origins=(origin_numbered(1),))
    call_command("log_restart", stdout=io.StringIO())


def _kept(tmp_path: Path, name: str, answer: dict) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(answer["receipt"]), encoding="utf-8")
    return str(path)


@pytest.mark.django_db(transaction=True)
def test_after_a_restart_exactly_the_lost_receipts_are_dropped_and_both_logs_are_followed(
    witnessed, verify, poster, post_task, make_agent, contribute, raised_caps, tmp_path
):
    witnesses = witnessed()
    older = post_task(poster)
    receipts = {
        "old a": _kept(tmp_path, "old-a", contribute(make_agent("a"), older)),
        "old b": _kept(tmp_path, "old-b", contribute(make_agent("b"), older)),
    }
    sequence_log()
    pinned = verify("log")
    assert pinned.returncode == 0, pinned.stdout
    assert f"pinned the site's logs: {log_origin()}" in pinned.stdout
    lost_task = post_task(poster)
    lost = {"lost c": _kept(tmp_path, "lost-c", contribute(make_agent("c"), lost_task))}
    receipts["queued in the backup"] = _kept(tmp_path, "d", contribute(make_agent("d"), lost_task))
    sequence_log()
    monitored = verify("monitor")
    assert monitored.returncode == 0, monitored.stdout  # it kept the witnessed tree of 6
    task_entry, _, queued_entry = (
        e["entry"] for e in entries_range(start=3, end=6, log=log_first())
    )

    # A backup taken at 3 entries is restored, which still had two of the entries lost queued;
    # then a write is answered before the sequencer sees that the log went back.
    log_rolled_back(3)
    for entry in (task_entry, queued_entry):
        QueuedEntry.objects.create(entry=canonical_json(entry).decode(), queued_at=timezone.now())
    receipts["logged again"] = _kept(tmp_path, "again", contribute(make_agent("e"), older))
    sequence_log()
    assert log_state.rollback_found() is not None
    _restarted(witnesses)
    newer = post_task(poster)
    receipts["new"] = _kept(tmp_path, "new", contribute(make_agent("f"), newer))
    sequence_log()

    for name, receipt in lost.items():
        checked = verify("receipt", receipt)
        assert checked.returncode == 1, (name, checked.stdout)
        assert "FAIL  DROPPED BY THE SITE" in checked.stdout, (name, checked.stdout)
        assert "recording entries 3 to 5 of " + log_origin() + " as lost" in checked.stdout
        assert json.dumps(json.loads(Path(receipt).read_text()), separators=(",", ":")) in (
            checked.stdout
        )
        assert f"      {log_origin()}\n      6\n" in checked.stdout, "the old checkpoint, signed"
    for name, receipt in receipts.items():
        checked = verify("receipt", receipt)
        assert checked.returncode == 0, (name, checked.stdout)
        assert "DROPPED" not in checked.stdout
    assert "is in the earlier log" in verify("receipt", receipts["old a"]).stdout

    said = (
        f"LOST  the site restarted its log as {origin_numbered(1)}: entries 3 to 5 of "
        f"{log_origin()} (lost_from 3, its tree of 6 entries) are lost"
    )
    runs = {
        "log": verify("log", "--full"),
        "monitor": verify("monitor"),
        "task": verify("task", str(older.pk)),
        "monitor again": verify("monitor"),
    }
    for command, checked in runs.items():
        assert checked.returncode == 0, (command, checked.stdout)
        assert said in checked.stdout, (command, checked.stdout)
    # It read entries 3 to 5 of the old log, two of which are logged again: it reads again.
    assert "3 new entries read, 3 in all, root recomputed (/api/log)" in runs["monitor"].stdout
    # The restart, the two entries logged again, the contribution queued, the newer task and its
    # contribution.
    assert "6 new entries read, 6 in all, root recomputed (/api/log/1)" in runs["monitor"].stdout
    assert "0 new entries read, 6 in all" in runs["monitor again"].stdout
    # The task's entry and two contributions in the old log, the third in the new.
    assert runs["task"].stdout.count("is in the log") == 4, runs["task"].stdout

    # A card that drops a log this verifier pinned (here: the pins name one more before it).
    (pins,) = (tmp_path / "home" / "verify").glob("*/logs.json")
    pins.write_text(json.dumps(["elsewhere/cairn/log", log_origin(), origin_numbered(1)]))
    dropped = verify("log")
    assert dropped.returncode == 1, dropped.stdout
    assert "which drop or reorder the ones pinned before" in dropped.stdout


@pytest.mark.django_db(transaction=True)
def test_a_restart_whose_previous_checkpoint_the_site_did_not_sign_fails(
    witnessed, verify, poster, post_task, make_agent, contribute
):
    witnesses = witnessed()
    task = post_task(poster)
    contribute(make_agent("a"), task)
    sequence_log()
    post_task(poster)
    sequence_log()
    assert verify("log").returncode == 0
    log_rolled_back(1)
    sequence_log()
    rollback = log_state.rollback_found()
    assert rollback is not None
    identity = log_state.log_identity()
    assert identity is not None
    promises = log_state.promises_of(identity)
    assert promises is not None and promises.witnessed is not None
    held = promises.witnessed
    assert held.note is not None and held.root is not None
    lines = held.note.split("\n")
    site_line = next(n for n, line in enumerate(lines) if line.startswith(f"— {log_origin()} "))
    prefix, signature = lines[site_line].rsplit(" ", 1)
    raw = bytearray(base64.b64decode(signature))
    raw[-1] ^= 1
    lines[site_line] = f"{prefix} {base64.b64encode(bytes(raw)).decode()}"
    log_state.witnessed_kept(identity, held.size, held.root, "\n".join(lines))

    _restarted(witnesses)

    checked = verify("log")
    assert checked.returncode == 1, checked.stdout
    assert (
        f"the first entry of {origin_numbered(1)}: its previous checkpoint is not signed by the "
        "site key"
    ) in checked.stdout
