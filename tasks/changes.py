"""The one hook through which a change to a task reaches a door's copy of its form, in the task's
transaction so no reader sees the two apart. The domain cannot import a door, so the setting
`CAIRN_TASK_CHANGED` names it: one setting, not an import-time registry, shows every reader."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from core.statements import Write
from tasks.models import Task


@dataclass(frozen=True)
class TaskChange:
    """A task as it now is, and its §3.2 view (`tasks.rendered.task_view`), already built."""

    task: Task
    view: dict[str, Any]


@dataclass(frozen=True)
class ChangesWritten:
    """The rows to send with the change, and the read model's form of each task (opaque here)."""

    writes: tuple[Write, ...] = ()
    forms: tuple[Any, ...] = ()


_hook = cache(import_string)


def hook_resolved() -> None:
    """At start: a wrong path stops the start, and no write pays for importing the door."""
    if settings.CAIRN_TASK_CHANGED:
        _hook(settings.CAIRN_TASK_CHANGED)


def task_changed(changes: Sequence[TaskChange]) -> ChangesWritten:
    """Call inside the transaction that changes the tasks, and send the rows with its own."""
    path = settings.CAIRN_TASK_CHANGED
    if not path or not changes:
        return ChangesWritten()
    return _hook(path)(changes)
