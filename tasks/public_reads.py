"""What every door shows of tasks: read on a replica unless it could be behind the primary (the task
not there yet, or open past its deadline); then the primary, evaluating what is due (§16.1)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.utils import timezone

from core.errors import ErrorCode, Refusal
from core.replicas import public_read
from tasks.due import PAST_DEADLINE
from tasks.evaluation import task_evaluated_if_due, tasks_evaluate_due
from tasks.models import Task
from tasks.selectors import TaskPage, task_feed_page, task_get, task_page


def _on_replica(task_id: str | uuid.UUID) -> Task | None:
    try:
        task = task_get(task_id)
    except Refusal as refusal:
        if refusal.code != ErrorCode.NOT_FOUND:
            raise
        return None
    return None if PAST_DEADLINE.holds(task, timezone.now()) else task


def task_shown(task_id: str | uuid.UUID) -> Task:
    return public_read(
        lambda: _on_replica(task_id), lambda: task_evaluated_if_due(task_get(task_id))
    )


def task_page_shown(**query: Any) -> TaskPage:
    return _page_shown(lambda: task_page(**query))


def task_feed_page_shown(*, mode: str, limit: int, cursor: str | None) -> TaskPage:
    return _page_shown(lambda: task_feed_page(mode=mode, limit=limit, cursor=cursor))


def _page_shown(read: Callable[[], TaskPage]) -> TaskPage:
    def evaluated_first() -> TaskPage:
        tasks_evaluate_due()
        return read()

    return public_read(lambda: None if PAST_DEADLINE.any_now() else read(), evaluated_first)
