"""django-q2 jobs, referenced by dotted path. Each is safe to run any number of times."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from django_q.models import Schedule
from django_q.tasks import schedule

from core.outages import through_outages
from tasks.evaluation import task_evaluate, tasks_evaluate_due
from tasks.health import sweep_record
from tasks.keyper_sweep import tasks_evaluate_with_releases

# How long a job waits out a database outage (within the cluster's job timeout) rather than fail: a
# failed one-time job never runs again, and §4.3's minute counts from the database's return (§16).
OUTAGE_PATIENCE_S = 40

Result = TypeVar("Result")


def _through_outages(job: Callable[[], Result]) -> Result:
    give_up = time.monotonic() + OUTAGE_PATIENCE_S

    def pause() -> bool:
        if time.monotonic() > give_up:
            return False
        time.sleep(1)
        return True

    return through_outages(job, pause=pause, who="a job")


def evaluate_task(task_id: str) -> bool:
    return _through_outages(lambda: task_evaluate(task_id=uuid.UUID(task_id)))


def evaluate_due() -> int:
    """Catches any task whose own schedule was lost or late; notes that it ran for `/readyz`."""

    def sweep() -> int:
        evaluated = tasks_evaluate_due() + tasks_evaluate_with_releases()
        sweep_record(evaluated=evaluated)
        return evaluated

    return _through_outages(sweep)


def schedule_evaluation(*, task_id: uuid.UUID, deadline: datetime) -> None:
    schedule(
        "tasks.jobs.evaluate_task",
        str(task_id),
        name=f"evaluate {task_id}",
        schedule_type=Schedule.ONCE,
        next_run=deadline,
        repeats=1,
    )
