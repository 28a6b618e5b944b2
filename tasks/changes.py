"""The one hook through which a change to a task reaches a read model outside the domain.

A door may keep its own copy of each task's public form in its own tables (the A2A door's
`a2a_gateway.stored_forms`). The copy must change in the transaction that changes the task, or a
reader could see the two in different states, and the domain cannot import a door: so the setting
`CAIRN_TASK_CHANGED` names the function, and every service that changes a task calls
`task_changed` inside its transaction and writes the rows it returns with its own. The read model
also hands back its form of each task, so a door that answers a write in that form answers with
the one it stored. One setting, not a registry filled at import time, so reading the settings
shows every reader of the domain's changes.
"""

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
    """What a read model makes of changed tasks: the rows to send with the change, and its own
    form of each task (opaque to the domain), in the order of the changes."""

    writes: tuple[Write, ...] = ()
    forms: tuple[Any, ...] = ()


_hook = cache(import_string)


def hook_resolved() -> None:
    """Import the configured hook at start (`TasksConfig.ready`): a wrong path stops the start,
    and no write pays for importing the door."""
    if settings.CAIRN_TASK_CHANGED:
        _hook(settings.CAIRN_TASK_CHANGED)


def task_changed(changes: Sequence[TaskChange]) -> ChangesWritten:
    """The configured read model's rows and forms for these changed tasks (nothing when none is
    configured). Call inside the transaction that changes them and send the rows with its own."""
    path = settings.CAIRN_TASK_CHANGED
    if not path or not changes:
        return ChangesWritten()
    return _hook(path)(changes)
