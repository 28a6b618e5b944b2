"""The log's entries (SPEC §15.3, §16.2), built here for the site and both served files
(`core.amalgam`), so an entry cannot read one way on the site and another in a client. A task's
entries are read off its public view (§3.2), a contribution's off its row or its receipt."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from core.canonical import canonical_digest
from ledger.keyper_seal import commitment_of

TASK = "cairn.log/task"
CONTRIBUTION = "cairn.log/contribution"
EVALUATION = "cairn.log/evaluation"
RESTART = "cairn.log/restart"
# The log's maximum merge delay (§15.3): an entry dated before a deadline may reach the log up to
# this long after it, so nothing that waits for a deadline's last entries acts before it has passed.
MAX_MERGE_DELAY = timedelta(seconds=60)


def task_entry(view: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": TASK,
        "task_id": view["id"],
        "public_input_digest": view["public_input_digest"],
        "deadline": view["deadline"],
        "created_at": view["created_at"],
    }


def contribution_entry(
    *,
    task_id: str,
    contribution_id: str,
    report_digest: str,
    salt: str | None,
    keyper_commitment: str | None,
    received_at: str,
) -> dict[str, Any]:
    """A report sealed to the keypers is logged by its contributor's commitment, the site holding
    neither report nor salt (§15.8); any other by the commitment its salt makes (§15.2), or, made
    before salts existed, by its bare digest."""
    if keyper_commitment is not None:
        sealed = {"commitment": keyper_commitment}
    elif salt:
        sealed = {"commitment": commitment_of(report_digest, salt)}
    else:
        sealed = {"report_digest": report_digest}
    return {
        "type": CONTRIBUTION,
        "task_id": task_id,
        "contribution_id": contribution_id,
        **sealed,
        "received_at": received_at,
    }


def evaluation_entry(view: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": EVALUATION,
        "task_id": view["id"],
        "outcome": view["outcome"],
        "evaluated_at": view["evaluated_at"],
        "evaluation_digest": canonical_digest(view["evaluation"]),
    }
