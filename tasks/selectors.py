"""Reads. Every door shows a task through `task_view`, so every door shows the same thing."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from agents.models import Agent
from cairn.clock import format_instant
from cairn.cursors import keyset_page
from cairn.lookups import get_by_id
from tasks.counts import task_count
from tasks.evaluation import task_evaluate, tasks_evaluate_due
from tasks.models import Contribution, Task, TaskStatus
from tasks.sealing import contribution_report

# The request fields, in the order the view shows them; they are what the approval digest covers.
REQUEST_FIELDS = (
    "title",
    "question",
    "sources",
    "acceptance_criteria",
    "deadline",
    "min_independent",
    "max_contributors",
    "budget",
)


def task_view(task: Task, *, with_evaluation: bool = True) -> dict[str, Any]:
    """The public view of SPEC §3.2: no agent id, no sealed content, only the count of contributions.
    `with_evaluation=False` leaves the evaluation out (None), for a list that does not show it."""
    return {
        "id": str(task.id),
        "title": task.title,
        "question": task.question,
        "sources": task.sources,
        "acceptance_criteria": task.acceptance_criteria,
        "deadline": task.deadline_text,
        "min_independent": task.min_independent,
        "max_contributors": task.max_contributors,
        "budget": task.budget,
        "public_input_digest": task.public_input_digest,
        "created_at": format_instant(task.created_at),
        "state": "open" if task.status == TaskStatus.WORKING else "evaluated",
        "contributions_received": task.contributions_count,
        "outcome": task.outcome or None,
        "verdict": task.verdict or None,
        "evaluated_at": format_instant(task.evaluated_at) if task.evaluated_at else None,
        "evaluation": task.evaluation if with_evaluation else None,
    }


def task_request(view: dict[str, Any]) -> dict[str, Any]:
    """The approved request inside a view: hash it with JCS to check `public_input_digest`."""
    return {name: view[name] for name in REQUEST_FIELDS}


def receipt_claims(contribution: Contribution) -> dict[str, str]:
    """The receipt without its signature: what the signature covers (SPEC §4.2, §15.2)."""
    return {
        "contribution_id": str(contribution.id),
        "task_id": str(contribution.task_id),
        "operation_id": contribution.operation_id,
        "report_digest": contribution.report_digest,
        "received_at": format_instant(contribution.received_at),
        "sealed_until": contribution.task.deadline_text,
    }


def receipt_view(contribution: Contribution) -> dict[str, str]:
    return {**receipt_claims(contribution), "signature": contribution.receipt_signature}


def _evaluate_if_due(task: Task) -> Task:
    if task.status == TaskStatus.WORKING and task.deadline <= timezone.now():
        task_evaluate(task_id=task.pk)
        task.refresh_from_db()
    return task


def task_get(task_id: str | uuid.UUID) -> Task:
    """The task, evaluated first when its deadline has passed, so no door shows it open too long."""
    return _evaluate_if_due(get_by_id(Task, task_id, what="task"))


# The read modes of the HTTP routes and the pages → the statuses they list.
TASK_MODES: dict[str, frozenset[str] | None] = {
    "open": frozenset({TaskStatus.WORKING}),
    "evaluated": frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED}),
    "all": None,
}


@dataclass(frozen=True)
class TaskPage:
    tasks: list[Task]
    next_cursor: str  # "" on the last page
    total: int


def task_page(
    *,
    statuses: frozenset[str] | None,
    limit: int,
    cursor: str | None,
    filter_key: str,
    context_id: uuid.UUID | None = None,
    status_timestamp_after: datetime | None = None,
    with_evaluation: bool = True,
) -> TaskPage:
    """One page of tasks, newest status first (ties by id), by keyset so a deep page costs what
    the first does. `filter_key` names the filter; a cursor only works with the filter it came from.
    `with_evaluation=False` does not load the evaluations (the largest column), for a caller that
    will not show them; pass the same to `task_view`."""
    tasks_evaluate_due()
    matches = Task.objects.all()
    if statuses is not None:
        matches = matches.filter(status__in=statuses)
    if context_id is not None:
        matches = matches.filter(pk=context_id)
    if status_timestamp_after is not None:
        matches = matches.filter(status_timestamp__gte=status_timestamp_after)
    listed = matches if with_evaluation else matches.defer("evaluation")
    rows, next_cursor = keyset_page(
        listed, time_field="status_timestamp", limit=limit, cursor=cursor, filter_key=filter_key
    )
    # Counting every row of a status costs a scan of its index; the kept counts cost one read.
    # The other filters match few tasks (a context is one task) or a bounded range of the index.
    filtered = context_id is not None or status_timestamp_after is not None
    total = matches.count() if filtered else task_count(statuses)
    return TaskPage(tasks=rows, next_cursor=next_cursor, total=total)


def agent_mine(agent: Agent) -> dict[str, Any]:
    """An agent's own tasks and contributions, its sealed reports included, newest first."""
    tasks_evaluate_due()
    tasks = Task.objects.filter(poster=agent).order_by("-created_at", "-id")
    contributions = (
        Contribution.objects.filter(agent=agent)
        .select_related("task")
        .order_by("-received_at", "-seq")
    )
    return {
        "tasks": [task_view(task) for task in tasks],
        "contributions": [
            {
                "task_id": str(c.task_id),
                "receipt": receipt_view(c),
                "report": contribution_report(c),
            }
            for c in contributions
        ],
    }
