"""What the log records of each write (SPEC §15.3): digests, ids and instants, never content or
an agent id. Each entry's bytes are its JCS form."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from core.canonical import canonical_digest
from core.clock import format_instant
from ledger.entry_types import CONTRIBUTION, EVALUATION, TASK
from ledger.keyper_seal import commitment_of

if TYPE_CHECKING:
    from tasks.models import Contribution, Task

# The log's maximum merge delay (§15.3): an entry dated before a deadline may reach the log up to
# this long after it, so nothing that waits for a deadline's last entries acts before it has passed.
MAX_MERGE_DELAY = timedelta(seconds=60)


def task_entry(task: Task) -> dict[str, Any]:
    return {
        "type": TASK,
        "task_id": str(task.id),
        "public_input_digest": task.public_input_digest,
        "deadline": task.deadline_text,
        "created_at": format_instant(task.created_at),
    }


def contribution_entry(contribution: Contribution) -> dict[str, Any]:
    """A keyper-sealed contribution's commitment is its contributor's, the server holding neither
    report nor salt (§15.8). A contribution made before salts existed keeps the entry it had:
    its bare report digest."""
    if contribution.keyper_seal is not None:
        sealed = {"commitment": contribution.keyper_seal["commitment"]}
    elif contribution.salt:
        sealed = {"commitment": commitment_of(contribution.report_digest, contribution.salt)}
    else:
        sealed = {"report_digest": contribution.report_digest}
    return {
        "type": CONTRIBUTION,
        "task_id": str(contribution.task_id),
        "contribution_id": str(contribution.id),
        **sealed,
        "received_at": format_instant(contribution.received_at),
    }


def evaluation_entry(task: Task) -> dict[str, Any]:
    """Call once the task's evaluation is set: the entry commits to its digest."""
    return {
        "type": EVALUATION,
        "task_id": str(task.id),
        "outcome": task.outcome,
        "evaluated_at": format_instant(task.evaluated_at),
        "evaluation_digest": canonical_digest(task.evaluation),
    }
