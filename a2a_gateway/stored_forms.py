"""Each task's A2A Task, written once when the task changes, by the SDK's own serialisers, into
the door's table (`TaskForm`); every read of every binding serves those bytes (SPEC §8.4).

The domain calls the one hook `tasks.changes.task_changed` in every transaction that changes a
task, and the settings point it here, so the forms commit with their change. Each form is what the
SDK's dispatcher writes for one question, as Starlette's `JSONResponse` encodes it, so a binding
sends it as it is: the GetTask result, the task as a ListTasks page holds it without and with
`includeArtifacts`, and A2A 0.3's tasks/get result. A number inside `metadata` or a data part is a
protobuf double, written `2.0` as the SDK writes it. A `Struct` has no order of its own, and two
processes may write one in two orders: written once here, every process serves the same bytes.
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
    """`tasks.changes.task_changed` for the A2A door (`CAIRN_TASK_CHANGED`): each changed task's
    forms, written whole over the last ones, and the Task they were written from, which answers
    the write that changed it (`translate.task_answer`)."""
    tasks = [task_from_view(change.view) for change in changes]
    rows = [task_form(change, task) for change, task in zip(changes, tasks, strict=True)]
    return ChangesWritten(statements.upserted(rows), tuple(tasks))
