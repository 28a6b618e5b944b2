"""The sweep's step for tasks whose keys are pending (SPEC §15.8): collect the keypers' releases,
outside any transaction, and evaluate each task once its reports open or its grace is over."""

from __future__ import annotations

import time
import uuid
from typing import Any

from django.utils import timezone

from ledger.releases import releases_collect
from tasks.evaluation import task_evaluate_with_releases
from tasks.models import Contribution, Task, TaskStatus
from tasks.opening import RELEASES_AFTER, sealed_opening
from tasks.selectors import task_sealed_site

# How long a sweep asks keypers (each has 5 s), so slow ones cannot outlast the worker's job (55 s,
# `Q_CLUSTER["timeout"]`); the rest are asked at the next sweep, oldest deadline first.
COLLECTING_S = 30


def _releases_collected(
    task_id: uuid.UUID, *, until: float
) -> dict[uuid.UUID, list[dict[str, Any]]]:
    contributions = (
        Contribution.objects.filter(task_id=task_id, keyper_seal__isnull=False)
        .select_related("task")
        .order_by("seq")
    )
    site = task_sealed_site(task_id)
    collected = {}
    for contribution in contributions:
        if time.monotonic() >= until:
            break
        if sealed_opening(contribution, contribution.task, site=site, final=False) is None:
            collected[contribution.id] = releases_collect(contribution)
    return collected


def tasks_evaluate_with_releases() -> int:
    until = time.monotonic() + COLLECTING_S
    awaiting = Task.objects.filter(
        status=TaskStatus.WORKING, keys_pending=True, deadline__lte=timezone.now() - RELEASES_AFTER
    )
    evaluated = 0
    for task_id in list(awaiting.order_by("deadline").values_list("pk", flat=True)):
        collected = _releases_collected(task_id, until=until)
        evaluated += task_evaluate_with_releases(task_id=task_id, collected=collected)
    return evaluated
