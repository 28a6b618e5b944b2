"""Each task's A2A Task, written once when the task changes, by the SDK's own serialisers, into
the door's table (`TaskForm`); every read of every binding serves those bytes (SPEC §8.4).

The domain calls the one hook `tasks.changes.task_changed` in every transaction that changes a
task, and the settings point it here (`task_forms_written`), so the forms commit with their
change. A task has three forms, each what the SDK's dispatcher writes for one question: the
GetTask result (`MessageToDict`), and the task as a ListTasks page holds it with and without
`includeArtifacts` (`serialize_list_tasks_response`, which also prints fields at their default).
A number inside `metadata` or a data part is a protobuf double, so it is written `2.0` here as
everywhere the SDK writes it. A2A 0.3's tasks/get has a fourth form: the same Task converted by
the SDK's 0.3 conversion, as its 0.3 adapter writes it. Each text is what Starlette's
`JSONResponse` makes of the SDK's dict, so a binding sends it as it is. A protobuf map (a
`Struct`) has no order of its own, and two processes may write one in two orders: written once
here, every process serves the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from a2a.compat.v0_3 import conversions
from a2a.server.routes.common import serialize_list_tasks_response
from a2a.types import ListTasksResponse, Task
from google.protobuf.json_format import MessageToDict

from a2a_gateway.models import TaskForm
from a2a_gateway.translate import task_from_view
from core import statements
from tasks.changes import ChangesWritten, TaskChange


def sdk_json(value: Any) -> str:
    """JSON text as the SDK's dispatchers send it (Starlette's `JSONResponse`)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def task_json(task: Task) -> str:
    """A Task as the SDK's dispatchers write a GetTask result."""
    return sdk_json(MessageToDict(task, preserving_proto_field_name=False))


def listed_json(task: Task) -> tuple[str, str]:
    """A Task as the SDK's `serialize_list_tasks_response` writes it inside a ListTasks page,
    without and with `includeArtifacts`. The SDK serialises the page once and, without artifacts,
    pops each task's `artifacts`: the same here, for one serialisation of the two forms."""
    [listed] = serialize_list_tasks_response(ListTasksResponse(tasks=[task]), True)["tasks"]
    without = {key: value for key, value in listed.items() if key != "artifacts"}
    return sdk_json(without), sdk_json(listed)


def v0_3_task_json(task: Task) -> str:
    """A Task as the SDK's 0.3 adapter writes a tasks/get result."""
    converted = conversions.to_compat_task(task)
    return sdk_json(converted.model_dump(mode="json", by_alias=True, exclude_none=True))


def task_form(change: TaskChange) -> TaskForm:
    """The changed task's row: its Task in each form, and the columns reads filter by."""
    return task_row(change, task_from_view(change.view))


def task_row(change: TaskChange, task: Task) -> TaskForm:
    """`task_form` of the Task already built from the change's view."""
    listed, listed_full = listed_json(task)
    return TaskForm(
        task_id=change.task.pk,
        status=change.task.status,
        status_timestamp=change.task.status_timestamp,
        deadline=change.task.deadline,
        keys_pending=change.task.keys_pending,
        task_json=task_json(task),
        list_item_json=listed,
        list_item_full_json=listed_full,
        task_v0_3_json=v0_3_task_json(task),
    )


def task_forms_written(changes: Sequence[TaskChange]) -> ChangesWritten:
    """`tasks.changes.task_changed` for the A2A door (`CAIRN_TASK_CHANGED`): each changed task's
    forms, written whole over the last ones, and the Task they were written from, which answers
    the write that changed it (`translate.task_answer`)."""
    tasks = [task_from_view(change.view) for change in changes]
    rows = [task_row(change, task) for change, task in zip(changes, tasks, strict=True)]
    return ChangesWritten(statements.upserted(rows), tuple(tasks))
