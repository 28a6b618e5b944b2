"""The one hook through which a change to a task reaches a read model outside the domain.

A door may keep its own copy of each task's public form, in its own tables (the A2A door does:
`a2a_gateway.stored_forms` writes its `TaskForm` rows). The copy must change in the transaction that changes the task, or a
reader could see the task in one state and its copy in another. The domain cannot import a door,
so the composition root names the function in the setting `CAIRN_TASK_CHANGED` (a dotted path,
`cairn/settings.py`), and every service that changes a task calls `task_changed` inside its
transaction and sends the rows it returns with its own (`core.statements.write_all`). The read
model also hands back what it built each row from, its own form of the task, so a door that
answers the write in that form (the A2A door answers a SendMessage with its Task) answers with
the one it stored rather than building it again from the view.

One setting, one callable: reading the settings shows every reader of the domain's changes. A
registry filled at import time or from an `AppConfig.ready` would hide which readers run behind
which apps happened to load.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from core.statements import Write
from tasks.models import Task


@dataclass(frozen=True)
class TaskChange:
    """A task as it now is, and its §3.2 view (`tasks.selectors.task_view`), already built."""

    task: Task
    view: dict[str, Any]


@dataclass(frozen=True)
class ChangesWritten:
    """What a read model makes of changed tasks: the rows to send with the change, and its own
    form of each task (opaque to the domain), in the order of the changes."""

    writes: tuple[Write, ...] = ()
    forms: tuple[Any, ...] = ()


TaskChanged = Callable[[Sequence[TaskChange]], ChangesWritten]


@cache
def _hook(path: str) -> TaskChanged:
    hook: TaskChanged = import_string(path)
    return hook


def hook_resolved() -> None:
    """Import the configured hook now (`TasksConfig.ready`): a wrong path then stops the start
    rather than the first write, and no write pays for importing the door, a slow import that
    would otherwise land on the first write."""
    if settings.CAIRN_TASK_CHANGED:
        _hook(settings.CAIRN_TASK_CHANGED)


def task_changed(changes: Sequence[TaskChange]) -> ChangesWritten:
    """The rows the configured read model writes for these changed tasks, and its forms of them
    (nothing when no read model is configured). Call inside the transaction that changes them and
    send the rows with its own."""
    path = settings.CAIRN_TASK_CHANGED
    if not path or not changes:
        return ChangesWritten()
    return _hook(path)(changes)
