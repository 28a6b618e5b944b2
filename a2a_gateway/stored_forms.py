"""The A2A forms of a task, rendered at write time with the SDK's own serialisers.

The SDK's JSON-RPC dispatcher turns a GetTask result into JSON with `MessageToDict` and a
ListTasks page with `serialize_list_tasks_response`, on every read, though a task's Task object
only changes when the task does. Here the same functions run once, when the task changes
(`tasks.rendered`), and the read path (`a2a_gateway.fast_reads`) serves the stored text.
"""

from __future__ import annotations

from typing import Any

from a2a.server.routes.common import serialize_list_tasks_response
from a2a.types import ListTasksResponse
from google.protobuf.json_format import MessageToDict

from a2a_gateway.translate import task_from_view
from tasks.rendered import json_text


def a2a_forms(view: dict[str, Any]) -> dict[str, str]:
    """`a2a_json`: the GetTask result; `a2a_list_json`: the task as a ListTasks page holds it
    without artifacts (a page with `includeArtifacts` is served by the SDK's dispatcher).

    One Task proto makes both. A page drops the artifacts, so they are dropped before the page
    is serialised and the evaluation (the largest part of an evaluated task) is converted once:
    the sweep renders every task it evaluates. The page is still serialised the SDK's way, from
    a ListTasksResponse: the Task is copied into it, and a copied `Struct` may list its keys in
    another order than the original does."""
    task = task_from_view(view)
    task_json = MessageToDict(task, preserving_proto_field_name=False)
    del task.artifacts[:]
    listed = serialize_list_tasks_response(ListTasksResponse(tasks=[task]), False)["tasks"][0]
    return {"a2a_json": json_text(task_json), "a2a_list_json": json_text(listed)}
