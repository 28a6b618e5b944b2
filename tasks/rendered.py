"""A task's §3.2 view, rendered once when the task changes and stored in its row (`view_json`).

Zulip's `rendered_content`: the writer renders, every reader is served the stored text. A task
changes three times at most (posted, a contribution counted, evaluated), each time inside a
service's transaction, and is read far more often. The view holds no sealed content, so neither
can its stored text. A door that keeps a form of its own (the A2A door's Task JSON) keeps it in
its own tables, written through the one hook `tasks.changes.task_changed`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import orjson

from core import statements
from tasks.changes import TaskChange, task_changed
from tasks.models import Task

# Bump when the view's rendering changes: rows below it are treated as not rendered (their view
# is built at read time) until written again.
RENDER_VERSION = 1
RENDERED_FIELDS = ("view_json", "rendered_version")


def json_text(value: Any) -> str:
    """Compact JSON that Cairn writes itself, by orjson: 6–8× faster than `json.dumps`
    (bench/README.md, F29). What orjson refuses (an int beyond 64 bits, a lone surrogate) goes to
    `json.dumps`, which writes or refuses it."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def task_render(task: Task) -> dict[str, Any]:
    """Set the task's stored view from its current fields, and return the view; saving it is the
    caller's, in the same transaction as the change it follows."""
    # selectors imports the evaluation, which renders: imported here to keep that cycle open.
    from tasks.selectors import task_view

    view = task_view(task)
    task.view_json = json_text(view)
    task.rendered_version = RENDER_VERSION
    return view


def is_rendered(task: Task) -> bool:
    return task.rendered_version == RENDER_VERSION


def stored_view(task: Task) -> dict[str, Any]:
    """The §3.2 view as stored at the last change; rendered afresh for a row not rendered yet."""
    if is_rendered(task) and task.view_json:
        return json.loads(task.view_json)
    from tasks.selectors import task_view

    return task_view(task)


def tasks_render(tasks: Iterable[Task]) -> int:
    """Render and store the view of these tasks, and every door's copy through `task_changed`
    (rows edited by hand, or written before their forms existed)."""
    count = 0
    for task in tasks:
        view = task_render(task)
        statements.write_all(
            statements.updated(task, RENDERED_FIELDS),
            *task_changed([TaskChange(task, view)]),
        )
        count += 1
    return count
