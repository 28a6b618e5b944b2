"""The SendMessage operations the A2A door dispatches to, one per skill: the handler picks from
this registry and the card's skills come from it, so the card cannot advertise what is not done.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from agents.services import Caller, WriteResult
from core.payloads import Payload, schema_name
from tasks.payloads import ContributionPayload, OpenTaskPayload, SealedContributionPayload
from tasks.services import contribution_submit, task_post


class Perform(Protocol):
    def __call__(self, caller: Caller, *, task_id: str, payload: Any) -> WriteResult: ...


@dataclass(frozen=True)
class SendMessageOperation:
    """One thing a `SendMessage` can do, and the skill the card shows for it."""

    skill_id: str
    name: str
    description: str
    tags: tuple[str, ...]
    examples: tuple[str, ...]
    # The data-part payloads it takes; the first is the form a client sends unless it knows
    # better (a refusal of a message with no data part names them all).
    models: tuple[type[Payload], ...]
    names_task: bool  # a message for this operation carries the `taskId` of an existing task
    perform: Perform

    @property
    def payloads(self) -> tuple[tuple[str, type[Payload]], ...]:
        return tuple((schema_name(model), model) for model in self.models)


def _post_task(caller: Caller, *, task_id: str, payload: Any) -> WriteResult:
    return task_post(caller, payload=payload)


POST_TASK = SendMessageOperation(
    skill_id="cairn.post_task",
    name="Post a source-review task",
    description=(
        "Post a public, checkable question about approved public URLs, with acceptance criteria and a "
        "deadline. Send SendMessage without taskId; its one data part is a cairn.open_task/0.1 payload "
        "(JSON Schema in the urn:cairn:a2a:payloads:v1 extension) whose approval.public_input_digest is the "
        "RFC 8785 SHA-256 of the request the person approved. Answer: the new Task, TASK_STATE_WORKING, "
        "or an agent Message with metadata.cairn.accepted = false and the refusal in its data part. "
        "Needs a Bearer token; messageId is the operation id, so a retry is safe."
    ),
    tags=("source-review", "post", "public", "sealed-review"),
    examples=(
        "Post a task asking whether a library release sends a given header on every request.",
    ),
    models=(OpenTaskPayload,),
    names_task=False,
    perform=_post_task,
)

CONTRIBUTE = SendMessageOperation(
    skill_id="cairn.contribute",
    name="Contribute a sealed verdict",
    description=(
        "Send a sealed verdict with evidence to an open task. Send SendMessage with taskId (and contextId, "
        "if any, equal to it); its one data part is either form of a contribution. Plain: a "
        "cairn.task.contribution/0.1 payload whose approval.public_output_digest is the RFC 8785 SHA-256 of "
        "the report without approval; the server seals it until the deadline. Sealed against the keeper, "
        "when the urn:cairn:verifiable:v1 extension lists keypers: a cairn.task.contribution.sealed/0.1 "
        "payload, the report encrypted by the contributor and its key split among those keypers, who release "
        "it only after the deadline (SPEC §15.8; cairn_verify.py seal makes one). Nobody reads either before "
        "the deadline; then every report is published with its digest. Answer: the Task with the receipt in "
        "metadata.cairn.contribution, an agent Message with the refusal, or -32004 when the task is closed. "
        "Needs a Bearer token."
    ),
    tags=("source-review", "contribute", "verdict", "sealed-review"),
    examples=(
        "Contribute source_supported to a task, quoting the line of the source that answers it.",
    ),
    models=(ContributionPayload, SealedContributionPayload),
    names_task=True,
    perform=contribution_submit,
)

SEND_MESSAGE_OPERATIONS: tuple[SendMessageOperation, ...] = (POST_TASK, CONTRIBUTE)
