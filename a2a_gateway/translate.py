"""Cairn's views and refusals as A2A's proto types, data parts as JSON, the SDK's JSON text."""

from __future__ import annotations

import json
import uuid
from typing import Any

from a2a.types import Artifact, Message, Part, Role, Task, TaskState
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict

from core.clock import parse_instant
from core.errors import Refusal
from core.json_input import ints_from_doubles

JSON_TYPE = "application/json"


def sdk_json(value: Any) -> str:
    """JSON text as the SDK's dispatchers send it (Starlette's `JSONResponse`)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def data_of(part: Part) -> Any:
    """A data part's JSON, integral doubles as ints: a Struct holds every number as a double."""
    return ints_from_doubles(MessageToDict(part.data))


def data_part(value: dict[str, Any], media_type: str = "") -> Part:
    """A data part holding a JSON object (an evaluation, a refusal): `Struct.update` builds its
    Value far faster than `ParseDict`, and the sweep builds one for every task."""
    data = struct_pb2.Value()
    data.struct_value.update(value)
    return Part(data=data, media_type=media_type)


def task_state(view: dict[str, Any]) -> TaskState:
    """open → WORKING; evaluated → FAILED when unresolved, else COMPLETED (SPEC §4.3)."""
    if view["state"] == "open":
        return TaskState.TASK_STATE_WORKING
    if view["outcome"] == "unresolved":
        return TaskState.TASK_STATE_FAILED
    return TaskState.TASK_STATE_COMPLETED


def task_public(view: dict[str, Any]) -> dict[str, Any]:
    """What `metadata.cairn` holds: the view without its evaluation, which is the artifact."""
    return {key: value for key, value in view.items() if key != "evaluation"}


def task_from_view(view: dict[str, Any], receipt: dict[str, Any] | None = None) -> Task:
    """SPEC §8.4's Task: id = contextId = the task's UUID, the view (and any receipt, as
    `contribution`) in `metadata.cairn`, the evaluation as the one artifact. No history."""
    public = task_public(view)
    if receipt is not None:
        public["contribution"] = receipt
    task = Task(id=view["id"], context_id=view["id"], metadata={"cairn": public})
    task.status.state = task_state(view)
    instant = view["created_at"] if view["state"] == "open" else view["evaluated_at"]
    task.status.timestamp.FromDatetime(parse_instant(instant))
    if view.get("evaluation") is not None:
        evaluation = data_part(view["evaluation"], JSON_TYPE)
        task.artifacts.append(
            Artifact(artifact_id="evaluation", name="Evaluation", parts=[evaluation])
        )
    return task


def task_answer(body: dict[str, Any], stored: Task | None) -> Task:
    """A write's answer: the Task the write stored (`WriteResult.form`), with the receipt if any;
    a replay, which stored nothing, builds it from its record's body."""
    if stored is None:
        return task_from_view(body["task"], body.get("receipt"))
    answer = Task()
    answer.CopyFrom(stored)
    if "receipt" in body:
        answer.metadata.fields["cairn"].struct_value["contribution"] = body["receipt"]
    return answer


def refusal_message(refusal: Refusal, *, task_id: str = "") -> Message:
    """A refusal as SPEC §6 answers it on A2A: an agent Message, not a Task and not an error."""
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_AGENT,
        parts=[data_part(refusal.as_body())],
        metadata={"cairn": {"accepted": False}},
        task_id=task_id,  # "" is no task: a proto3 string has no presence
        context_id=task_id,
    )
