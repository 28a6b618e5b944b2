"""A contribution's report, sealed and revealed (SPEC §4.2, §15.6, §15.8). It stays sealed: its
public copy is its item in the task's evaluation, so the sweep never rewrites its row."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Protocol

from ledger.seal import report_open
from tasks.models import Contribution, TaskStatus


def is_sealed(contribution: Contribution) -> bool:
    """Nobody, the keeper included, reads it before the evaluation (SPEC §4.2)."""
    return contribution.task.status == TaskStatus.WORKING


def contribution_report(contribution: Contribution) -> dict[str, Any] | None:
    """The report for its author; None when void or sealed to keypers (the server can't open it)."""
    if not is_sealed(contribution):
        return evaluation_item(contribution).get("report")
    if contribution.keyper_seal is not None:
        return None
    return report_unsealed(contribution)


class ContributionRow(Protocol):
    """What the evaluation reads: a Contribution, or a row of exactly these fields (the sweep's)."""

    id: uuid.UUID
    task_id: uuid.UUID
    sealed_report: bytes | memoryview | None
    report_digest: str
    salt: str
    received_at: datetime
    keyper_seal: dict[str, Any] | None
    releases: list[dict[str, Any]]


def report_unsealed(contribution: ContributionRow) -> dict[str, Any]:
    sealed = contribution.sealed_report
    if sealed is None:
        raise ValueError(f"contribution {contribution.id} holds no sealed report")
    return report_open(bytes(sealed), task_id=contribution.task_id, contribution_id=contribution.id)


def evaluation_item(contribution: Contribution) -> dict[str, Any]:
    evaluation = contribution.task.evaluation or {}
    contribution_id = str(contribution.id)
    for item in evaluation.get("contributions", ()):
        if item["contribution_id"] == contribution_id:
            return item
    raise ValueError(
        f"the evaluation of task {contribution.task_id} does not hold {contribution_id}"
    )
