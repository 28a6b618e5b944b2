"""Rule `cairn.rules/0.1` (SPEC §4.3): evaluate a task once, at its deadline, and never again."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.utils import timezone

from cairn.clock import format_instant, now_ms
from tasks.models import Outcome, Task, TaskStatus
from tasks.payloads import VERDICTS

EVALUATION_SCHEMA = "cairn.evaluation/0.1"
RULE = "cairn.rules/0.1"


def decide(verdicts: list[str], min_independent: int) -> tuple[Outcome, str | None]:
    """The fixed rule: too few reports → unresolved; any disagreement → contested; else resolved."""
    if len(verdicts) < min_independent:
        return Outcome.UNRESOLVED, None
    if len(set(verdicts)) == 1:
        return Outcome.RESOLVED, verdicts[0]
    return Outcome.CONTESTED, None


def task_evaluate(*, task_id: uuid.UUID) -> bool:
    """Evaluate a task whose deadline has passed. True when this call did it.

    Safe to call from any number of workers and readers at once: the row lock and the
    "still working" guard let exactly one of them write, and the result never changes.
    """
    with transaction.atomic():
        task = Task.objects.select_for_update().filter(pk=task_id).first()
        if task is None or task.status != TaskStatus.WORKING or task.deadline > timezone.now():
            return False
        contributions = list(task.contributions.order_by("seq"))
        verdicts = [contribution.report["verdict"] for contribution in contributions]
        outcome, verdict = decide(verdicts, task.min_independent)
        evaluated_at = now_ms()
        evaluation: dict[str, Any] = {
            "schema": EVALUATION_SCHEMA,
            "rule": RULE,
            "outcome": str(outcome),
            "verdict": verdict,
            "evaluated_at": format_instant(evaluated_at),
            "min_independent": task.min_independent,
            "counts": {name: verdicts.count(name) for name in VERDICTS},
            "contributions": [
                {
                    "contribution_id": str(contribution.id),
                    "received_at": format_instant(contribution.received_at),
                    "report_digest": contribution.report_digest,
                    "report": contribution.report,
                }
                for contribution in contributions
            ],
        }
        return bool(
            Task.objects.filter(pk=task.pk, status=TaskStatus.WORKING).update(
                status=TaskStatus.FAILED if outcome == Outcome.UNRESOLVED else TaskStatus.COMPLETED,
                outcome=outcome,
                verdict=verdict or "",
                evaluated_at=evaluated_at,
                status_timestamp=evaluated_at,
                evaluation=evaluation,
            )
        )


def tasks_evaluate_due() -> int:
    """Evaluate every task past its deadline; returns how many this call evaluated."""
    due = Task.objects.filter(status=TaskStatus.WORKING, deadline__lte=timezone.now()).values_list(
        "pk", flat=True
    )
    return sum(task_evaluate(task_id=task_id) for task_id in list(due))
