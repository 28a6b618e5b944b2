"""The A2A forms of a task, rendered at write time as the SDK's own serialisers write them.

The SDK's JSON-RPC dispatcher turns a GetTask result into JSON with `MessageToDict` and a
ListTasks page with `serialize_list_tasks_response`, on every read, though a task's Task object
only changes when the task does. Here the same functions run once, when the task changes
(`tasks.rendered`), and the read path (`a2a_gateway.fast_reads`) serves the stored text.

They run on the Task's messages with its two `Struct`s (the view in `metadata.cairn`, the
evaluation's data part) left empty, and the Structs' JSON is put in their places: a `Struct` is a
JSON object by definition, and `json_format` writes it by walking the protobuf map value by value
in Python, which was most of the sweep's time (bench/README.md, F30). What a Struct adds to its
JSON is only the key order of upb's map, seeded per process, and the double its numbers become;
`_struct_json` takes both from the SDK's own map, so the bytes are those `json_format` writes in
this process (`tests/a2a/test_stored_forms.py` holds them to it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache, lru_cache
from typing import Any

from a2a.server.routes.common import serialize_list_tasks_response
from a2a.types import ListTasksResponse, TaskState
from google.protobuf.json_format import MessageToDict

from a2a_gateway.translate import status_instant, task_message, task_public, task_state
from tasks.rendered import float_marked, json_text

# Distinct key sets are few (the view's, a budget's, an evaluation's, a report's and its
# evidence's); the bound keeps a stream of agents' odd keys from growing the cache for ever.
_ORDERS_CACHED = 4096

KeyOrder = Callable[[tuple[str, ...]], tuple[str, ...]]
# What a Struct gives back exactly as it was put in.
_KEPT = frozenset({str, bool, type(None)})


# Enough of a view for `task_message` to build a Task around the keys whose order is asked.
_PROBE = {"id": "probe", "state": "open", "created_at": "2000-01-01T00:00:00.000Z"}


@lru_cache(maxsize=_ORDERS_CACHED)
def _metadata_order(keys: tuple[str, ...]) -> tuple[str, ...]:
    """The order upb's map lists these keys in, inserted in this order, once `task_message` has
    put them in the Task's metadata. Every map of a Struct is built the same way whatever its
    depth, so one probe a key set answers for the view and every object inside it."""
    task = task_message(_PROBE, cairn=dict.fromkeys(keys), evaluation=None)
    return tuple(task.metadata.fields["cairn"].struct_value.fields)


@lru_cache(maxsize=_ORDERS_CACHED)
def _listed_order(keys: tuple[str, ...]) -> tuple[str, ...]:
    """The same once the Task is copied into a ListTasksResponse: a copied map is built afresh
    and may list its keys otherwise."""
    task = task_message(_PROBE, cairn=dict.fromkeys(keys), evaluation=None)
    response = ListTasksResponse(tasks=[task])
    return tuple(response.tasks[0].metadata.fields["cairn"].struct_value.fields)


@lru_cache(maxsize=_ORDERS_CACHED)
def _evaluation_order(keys: tuple[str, ...]) -> tuple[str, ...]:
    """The same in the evaluation artifact's data part, which is copied into its Part, the
    Part into the Artifact and the Artifact into the Task."""
    task = task_message(_PROBE, cairn={}, evaluation=dict.fromkeys(keys))
    return tuple(task.artifacts[0].parts[0].data.struct_value.fields)


def _struct_json(value: Any, order: KeyOrder) -> Any:
    """A JSON value as `json_format` writes it back out of a Struct: objects in the map's key
    order, every number the double `Value.number_value` holds. What a Struct refuses (a key that
    is not a string, a value that is not JSON, a number beyond a double) is refused here too.
    Values kept as they are never cost a call: they are most of a view. Every number goes
    through `float_marked`, so that `json_text` writes the form as `json_format`'s caller would."""
    if type(value) in _KEPT:
        return value
    if isinstance(value, dict):
        converted = {}
        for key in order(tuple(value)):
            item = value[key]
            converted[key] = item if type(item) in _KEPT else _struct_json(item, order)
        return converted
    if isinstance(value, (list, tuple)):
        return [item if type(item) in _KEPT else _struct_json(item, order) for item in value]
    if isinstance(value, str):  # a str subclass (a TextChoices member): a Struct keeps its text
        return str.__str__(value)
    if isinstance(value, (int, float)):
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(f"{value!r} is not a JSON number")
        return float_marked(number)
    raise ValueError(f"{type(value).__name__} is not a JSON value")


@cache
def _shapes(state: TaskState, with_artifact: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """The GetTask and page forms the SDK's serialisers write for a Task in this state, with or
    without its artifact, around a stand-in id and empty Structs. All else in them is the same
    for every task in that state, so the serialisers run once a shape, not once a task: on a
    Task with nothing in its Structs they still took a fifth of the sweep (F31)."""
    task = task_message(_PROBE, cairn={}, evaluation={} if with_artifact else None)
    task.status.state = state
    task_json = MessageToDict(task, preserving_proto_field_name=False)
    del task.artifacts[:]
    listed = serialize_list_tasks_response(ListTasksResponse(tasks=[task]), False)["tasks"][0]
    return task_json, listed


def _timestamp_json(instant: str) -> str:
    """An instant as `Timestamp.ToJsonString` writes it, which `json_format` calls: Cairn's
    instants hold whole milliseconds (`core.clock`), which it writes as three digits, or none
    when they are zero. Parsing the instant into a Timestamp to write it back cost more than the
    rest of a shape's form."""
    return instant[:-5] + "Z" if instant.endswith(".000Z") else instant


def _in_shape(
    shape: dict[str, Any], task_id: str, timestamp: str, cairn: Any, evaluation: Any
) -> dict[str, Any]:
    """A shape's form of one task: the shape's own keys in its order, with this task's values."""
    form = {
        **shape,
        "id": task_id,
        "contextId": task_id,
        "status": {**shape["status"], "timestamp": timestamp},
        "metadata": {"cairn": cairn},
    }
    if evaluation is not None:
        [artifact] = shape["artifacts"]
        [part] = artifact["parts"]
        form["artifacts"] = [{**artifact, "parts": [{**part, "data": evaluation}]}]
    return form


def a2a_forms(view: dict[str, Any]) -> dict[str, str]:
    """`a2a_json`: the GetTask result; `a2a_list_json`: the task as a ListTasks page holds it
    without artifacts (a page with `includeArtifacts` is served by the SDK's dispatcher).

    The page is serialised the SDK's way, from a ListTasksResponse the Task is copied into, so
    its view lists its keys in the copied map's order."""
    public = task_public(view)
    evaluation = view.get("evaluation")
    task_shape, listed_shape = _shapes(task_state(view), evaluation is not None)
    instant = _timestamp_json(status_instant(view))
    # `data_part` leaves an empty object's Value unset, which the shape already writes as null.
    data = _struct_json(evaluation, _evaluation_order) if evaluation else None
    task_json = _in_shape(
        task_shape, view["id"], instant, _struct_json(public, _metadata_order), data
    )
    listed = _in_shape(listed_shape, view["id"], instant, _struct_json(public, _listed_order), None)
    return {
        "a2a_json": json_text(task_json, floats_marked=True),
        "a2a_list_json": json_text(listed, floats_marked=True),
    }
