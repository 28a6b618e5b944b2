"""Each task's A2A forms, written by the SDK's own serialisers in every transaction that changes
the task; every binding serves those bytes (SPEC §8.4), each what the SDK's dispatcher writes for
one question (a `Struct`'s numbers as doubles, `2.0`). A `Struct` has no order of its own and two
processes may write one in two orders: written once here, all serve the same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

from a2a.compat.v0_3 import conversions
from a2a.server.routes.common import serialize_list_tasks_response
from a2a.types import ListTasksResponse, Task
from google.protobuf.json_format import MessageToDict

from a2a_gateway.models import TaskForm
from a2a_gateway.translate import sdk_json, task_from_view
from core import statements
from tasks.changes import ChangesWritten, TaskChange


def task_form(change: TaskChange, task: Task | None = None) -> TaskForm:
    task = task_from_view(change.view) if task is None else task
    # The SDK serialises a page once and, without artifacts, pops each task's `artifacts`.
    [listed] = serialize_list_tasks_response(ListTasksResponse(tasks=[task]), True)["tasks"]
    without = {key: value for key, value in listed.items() if key != "artifacts"}
    v0_3 = conversions.to_compat_task(task).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    return TaskForm(
        task_id=change.task.pk,
        status=change.task.status,
        status_timestamp=change.task.status_timestamp,
        deadline=change.task.deadline,
        keys_pending=change.task.keys_pending,
        task_json=sdk_json(MessageToDict(task, preserving_proto_field_name=False)),
        list_item_json=sdk_json(without),
        list_item_full_json=sdk_json(listed),
        task_v0_3_json=sdk_json(v0_3),
    )


def task_forms_written(changes: Sequence[TaskChange]) -> ChangesWritten:
    """`tasks.changes.task_changed` for the A2A door: each task's forms, written whole over the
    last ones, and the Task they came from, which answers the write (`translate.task_answer`)."""
    tasks = [task_from_view(change.view) for change in changes]
    rows = [task_form(change, task) for change, task in zip(changes, tasks, strict=True)]
    return ChangesWritten(statements.upserted(rows), tuple(tasks))
