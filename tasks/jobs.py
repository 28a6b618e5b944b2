"""django-q2 jobs, referenced by dotted path. Each is safe to run any number of times."""

from __future__ import annotations

import uuid
from datetime import datetime

from django_q.models import Schedule
from django_q.tasks import schedule

from tasks.evaluation import task_evaluate, tasks_evaluate_due


def evaluate_task(task_id: str) -> bool:
    return task_evaluate(task_id=uuid.UUID(task_id))


def evaluate_due() -> int:
    """The sweep: catches any task whose own schedule was lost or late."""
    return tasks_evaluate_due()


def schedule_evaluation(*, task_id: uuid.UUID, deadline: datetime) -> None:
    schedule(
        "tasks.jobs.evaluate_task",
        str(task_id),
        name=f"evaluate {task_id}",
        schedule_type=Schedule.ONCE,
        next_run=deadline,
        repeats=1,
    )
