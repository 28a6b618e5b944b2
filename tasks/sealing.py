"""A contribution's report while sealed and once revealed (SPEC §4.2, §15.6)."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from core import statements
from ledger.seal import report_open
from tasks.models import Contribution, TaskStatus

# A contribution is sealed while its task is open: nobody, the keeper included, reads it before
# the evaluation (SPEC §4.2).
_SEALED = Q(task__status=TaskStatus.WORKING)


def is_sealed(contribution: Contribution) -> bool:
    return contribution.task.status == TaskStatus.WORKING


def contributions_sealed(
    contributions: QuerySet[Contribution], *, sealed: bool
) -> QuerySet[Contribution]:
    """The contributions still sealed, or (`sealed=False`) those revealed by their evaluation."""
    return contributions.filter(_SEALED) if sealed else contributions.exclude(_SEALED)


def revealed_report(contribution: Contribution) -> dict[str, Any] | None:
    """The report as anyone may read it: None while it is sealed."""
    return None if is_sealed(contribution) else contribution_report(contribution)


def contribution_report(contribution: Contribution) -> dict[str, Any]:
    """The report: the public copy once evaluated, else opened from its seal (for its author, or
    for the evaluation)."""
    if contribution.report is not None:
        return contribution.report
    sealed = contribution.sealed_report
    if sealed is None:
        raise ValueError(f"contribution {contribution.id} holds neither a report nor its seal")
    return report_open(bytes(sealed), task_id=contribution.task_id, contribution_id=contribution.id)


def contributions_reveal(contributions: list[Contribution]) -> None:
    """Open each sealed report once, keep it as the public copy and drop the sealed bytes, in one
    statement. Call inside the evaluation's transaction, under the task's row lock."""
    sealed = [c for c in contributions if c.report is None]
    for contribution in sealed:
        contribution.report = contribution_report(contribution)
        contribution.sealed_report = None
    statements.update_many(sealed, ["report", "sealed_report"])
