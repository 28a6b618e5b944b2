"""`manage.py log_restart`: start a new log after the database lost entries the site had signed
(SPEC §16.2)."""

from django.core.management.base import BaseCommand, CommandError

from ledger.notes import log_verifier_key
from ledger.restart import RestartRefused, log_restart
from ledger.witnesses import witnesses_cosign


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
        try:
            done = log_restart()
        except RestartRefused as refused:
            raise CommandError(f"log_restart refused: {refused}") from None
        cosigned = witnesses_cosign()
        gone = max(done.previous_size - done.lost_from, 0)
        self.stdout.write(
            f"started {done.log.origin} (routes under {done.log.path}/) after "
            f"{done.previous.origin}\n"
            f"  lost_from {done.lost_from}: the previous checkpoint held {done.previous_size} "
            f"entries, {gone} of them past what this database logged; the writes among them "
            "that it still holds are logged again, the rest are lost\n"
            f"  logged again {done.logged_again} queued entries after the restart entry; "
            f"checkpoint of {done.checkpoint.tree_size} signed, {cosigned} cosignatures\n"
            f"  witnesses follow it with the verifier key {log_verifier_key(done.log.origin).text}"
        )
