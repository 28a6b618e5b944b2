"""A task's §3.2 view, stored in its row when it changes, as Zulip stores `rendered_content`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import orjson

from core import statements
from core.clock import format_instant, parse_instant
from tasks.changes import TaskChange, task_changed
from tasks.models import Task, TaskStatus

# Bump when the view's rendering changes, with a migration that renders every task again
# (`tasks_render`): reads serve the stored view as it is.
RENDER_VERSION = 1
RENDERED_FIELDS = ("view_json", "rendered_version")


def json_text(value: Any) -> str:
    """Compact JSON by orjson; what it refuses (an int past 64 bits, a surrogate) by json.dumps."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def task_view(task: Task) -> dict[str, Any]:
    """No agent id, no sealed content."""
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
        "evaluation": task.evaluation,
    }


def task_render(task: Task) -> dict[str, Any]:
    """Set the task's stored view and return it; the caller saves it with the change."""
    view = task_view(task)
    task.view_json = json_text(view)
    task.rendered_version = RENDER_VERSION
    return view


def stored_view(task: Task) -> dict[str, Any]:
    return json.loads(task.view_json)


def view_open_until(view: Mapping[str, Any]) -> datetime | None:
    """Until when a view holds, for a cache: its deadline while open; None (ever) once evaluated."""
    return parse_instant(view["deadline"]) if view["state"] == "open" else None


def tasks_render(tasks: Iterable[Task]) -> None:
    """Store the view and every door's copy of tasks edited by hand, or older than their forms."""
    for task in tasks:
        view = task_render(task)
        statements.write_all(
            statements.updated(task, RENDERED_FIELDS),
            *task_changed([TaskChange(task, view)]).writes,
        )
