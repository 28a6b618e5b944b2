"""`manage.py log_restart` (SPEC §16.2): the old log cannot be signed again once the database went
back, since its readers and witnesses hold a longer tree than the database does; so a new log
starts (`Command.help` says how), and the entries from `lost_from` to the old checkpoint's size are
visibly dropped for good."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from core import statements
from core.canonical import canonical_json
from core.clock import now_ms
from ledger import log_state
from ledger.entry_types import RESTART
from ledger.logs import LogRef, log_current, origin_numbered
from ledger.models import Log, QueuedEntry
from ledger.notes import log_verifier_key
from ledger.services import SEQUENCER_LOCK, _append, checkpoint_publish, tree_size
from ledger.signed_note import checkpoint_body_parse, note_parse
from ledger.witnesses import (
    checkpoint_note,
    checkpoint_quorate_latest,
    witness_quorum,
    witnesses_cosign,
)


def _refused(why: str) -> CommandError:
    return CommandError(f"log_restart refused: {why}")


def _previous_checkpoint(identity: str, log: LogRef) -> str:
    """The old log's last checkpoint a witness quorum cosigned (without witnesses, the last the
    site signed), as kept beside the keys; the database's own when the state file lacks it."""
    promises = log_state.promises_of(identity)
    kept = None
    if promises is not None:
        kept = promises.witnessed if witness_quorum() else promises.signed
    if kept is not None and kept.note is not None:
        return kept.note
    stored = checkpoint_quorate_latest(log)
    if stored is None:
        raise _refused(f"no checkpoint of {log.origin} is known to have been published")
    return checkpoint_note(stored)


class Command(BaseCommand):
    help = (
        "Start a new log, with a new origin, after the database went back in time and the lost "
        "entries cannot be restored. Its first entry records the old log's last witnessed "
        "checkpoint and the first index this database no longer holds; the queued entries the "
        "database still holds follow it. Runs only when the sequencer has found the log gone "
        "back (/readyz says so), and takes the sequencer's lock: it is refused while the worker "
        "is integrating. Witnesses must follow the new origin with the verifier key it prints."
    )

    def handle(self, *args: object, **options: object) -> None:
        # The witnesses are asked once the transaction has committed.
        with transaction.atomic():
            if not statements.advisory_lock(SEQUENCER_LOCK, wait=False):
                raise _refused("the sequencer is at work: stop the worker, then run this again")
            identity = log_state.log_identity()
            rollback = log_state.rollback_found()
            if identity is None or rollback is None:
                raise _refused(
                    "the log has not gone back: the sequencer signs it as it is, and a new log "
                    "would only hide it (see /readyz and the sequencer's log)"
                )
            previous = log_current()
            lost_from = tree_size(previous)
            note = _previous_checkpoint(identity, previous)
            # A database restored to before an earlier restart holds fewer logs than were started:
            # the next number is past every one, so no origin ever names two logs.
            started = [int(log["number"]) for log in log_state.logs_started()]
            number = max([previous.number, *started]) + 1
            row = statements.created(
                Log(
                    number=number,
                    origin=origin_numbered(number),
                    start=previous.start + lost_from,
                    created_at=now_ms(),
                )
            )
            log = LogRef(row.number, row.origin, row.start)
            entry = {
                "type": RESTART,
                "previous_origin": previous.origin,
                "previous_checkpoint": note,
                "lost_from": lost_from,
            }
            restart = QueuedEntry(entry=canonical_json(entry).decode(), queued_at=row.created_at)
            queued = list(QueuedEntry.objects.order_by("id"))
            size = _append([restart, *queued], 0, log)
            checkpoint = checkpoint_publish(size, log)
        log_state.log_started_kept(log.number, log.origin)
        new_identity = log_state.log_identity()
        assert new_identity is not None
        log_state.signed_kept(new_identity, checkpoint)
        previous_size = checkpoint_body_parse(note_parse(note).body).tree_size
        cosigned = witnesses_cosign()
        gone = max(previous_size - lost_from, 0)
        self.stdout.write(
            f"started {log.origin} (routes under {log.path}/) after {previous.origin}\n"
            f"  lost_from {lost_from}: the previous checkpoint held {previous_size} "
            f"entries, {gone} of them past what this database logged; the writes among them "
            "that it still holds are logged again, the rest are lost\n"
            f"  logged again {len(queued)} queued entries after the restart entry; "
            f"checkpoint of {checkpoint.tree_size} signed, {cosigned} cosignatures\n"
            f"  witnesses follow it with the verifier key {log_verifier_key(log.origin).text}"
        )
