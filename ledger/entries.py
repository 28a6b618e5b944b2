"""What the log records of each write (SPEC §15.3): digests, ids and instants, never content or
an agent id. Each entry's bytes are its JCS form."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from core.clock import format_instant
from ledger import entry_types

if TYPE_CHECKING:
    from tasks.models import Contribution

# The log's maximum merge delay (§15.3): an entry dated before a deadline may reach the log up to
# this long after it, so nothing that waits for a deadline's last entries acts before it has passed.
MAX_MERGE_DELAY = timedelta(seconds=60)


def contribution_entry(contribution: Contribution) -> dict[str, Any]:
    keyper_seal = contribution.keyper_seal
    return entry_types.contribution_entry(
        task_id=str(contribution.task_id),
        contribution_id=str(contribution.id),
        report_digest=contribution.report_digest,
        salt=contribution.salt,
        keyper_commitment=keyper_seal["commitment"] if keyper_seal is not None else None,
        received_at=format_instant(contribution.received_at),
    )
