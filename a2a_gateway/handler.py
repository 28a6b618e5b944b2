"""The SDK's `RequestHandler` over Cairn's services and the door's one read (`stored_reads`). It
only translates. No SDK task store and no `AgentExecutor`: tasks are public rows."""

from __future__ import annotations

import functools
import logging
import unicodedata
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import RequestHandler
from a2a.server.request_handlers.request_handler import validate_request_params
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    PushNotificationNotSupportedError,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.errors import A2AError
from a2a.utils.proto_utils import validate_proto_required_fields
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict, ParseDict

from a2a_gateway.operations import SEND_MESSAGE_OPERATIONS, SendMessageOperation
from a2a_gateway.request_cycle import DjangoCycle
from a2a_gateway.stored_reads import DJANGO_SOURCE, no_tenant, read_page, stored_task
from a2a_gateway.translate import data_of, ints_from_doubles, refusal_message, task_answer
from agents.models import Agent, Door
from agents.services import Caller
from calls.published_schemas import published_schema_url
from core.errors import ErrorCode, Issue, Refusal
from core.outages import outage_refusal
from tasks.selectors import task_get

logger = logging.getLogger(__name__)

FACTS_STATE = "cairn.facts"

MAX_MESSAGE_ID = 128
PART_KINDS = {"text": "text", "raw": "file", "url": "file", "data": "data", None: "empty"}

Method = TypeVar("Method", bound=Callable[..., Awaitable[Any]])
NOT_SENT: Any = object()  # a value a client did not send at all


@dataclass(frozen=True)
class AsSent:
    """A ListTasks `status` as sent (the SDK's parser reads an unknown name as no filter, which
    SPEC §8.5 refuses) and a first data part's JSON (far cheaper than converting the proto back)."""

    status: Any = None
    data: Any = NOT_SENT

    @classmethod
    def of(cls, params: Any) -> AsSent:
        if not isinstance(params, dict):
            return cls()
        try:
            data = params["message"]["parts"][0]["data"]
        except (TypeError, KeyError, IndexError):
            data = NOT_SENT
        return cls(status=params.get("status"), data=data)


@dataclass(frozen=True)
class Facts:
    """What a binding learned of a request, for the handler, in the call context's state."""

    agent: Agent | None
    origin: str
    as_sent: AsSent
    cycle: DjangoCycle


def failure_error(exc: Exception, what: str) -> InternalError:
    """A -32603 leaking no Python text: only an outage's (retry) message; `what` is for the log."""
    if (outage := outage_refusal(exc)) is not None:
        return InternalError(message=outage.message)
    logger.exception("A2A %s failed", what)
    return InternalError()


def _guarded(method: Method) -> Method:
    @functools.wraps(method)
    async def wrapper(self: RequestHandler, params: Any, context: ServerCallContext) -> Any:
        try:
            return await method(self, params, context)
        except A2AError:
            raise
        except Exception as exc:
            raise failure_error(exc, method.__name__) from None

    return wrapper  # type: ignore[return-value]


def _json_emptied(request: SendMessageRequest) -> SendMessageRequest:
    """A copy without its JSON values (data parts, metadata), for the SDK's required-fields check:
    they hold no REQUIRED field, and walking them in Python is most of the check's cost."""
    shell = SendMessageRequest()
    shell.CopyFrom(request)
    held: list[SendMessageRequest | Message | Part] = [shell, shell.message, *shell.message.parts]
    for holder in held:
        if holder.HasField("metadata"):
            holder.metadata.Clear()
            holder.metadata.SetInParent()
    for part in shell.message.parts:
        if part.HasField("data"):
            part.data.null_value = struct_pb2.NULL_VALUE
    return shell


def _check_message(message: Message) -> None:
    """The shape of a message Cairn can read (SPEC §8.2); its payload is for the services."""
    message_id = message.message_id
    if not 1 <= len(message_id) <= MAX_MESSAGE_ID or any(
        unicodedata.category(char) == "Cc" for char in message_id
    ):
        raise InvalidParamsError(
            message=f"messageId must be 1 to {MAX_MESSAGE_ID} characters without control characters (it is the operation id)"
        )
    if message.role != Role.ROLE_USER:
        raise InvalidParamsError(message="role must be ROLE_USER")
    if not message.parts:
        raise InvalidParamsError(message="a message needs a part: one data part with the payload")
    if message.context_id and message.context_id != message.task_id:
        raise InvalidParamsError(
            message="contextId must be empty or equal to taskId (a task's id is its context)"
        )


def _payload_part_refusal(
    message: Message, operation: SendMessageOperation, origin: str
) -> Refusal:
    """Not exactly one data part: an invalid payload, not a protocol error, so a generic client
    (or an LLM saying "hello") learns what Cairn reads."""
    kinds = ", ".join(PART_KINDS[part.WhichOneof("content")] for part in message.parts)
    # The first form only: the others (a keyper-sealed report) are for clients made for them.
    name, model = operation.payloads[0]
    url = published_schema_url(model, origin=origin)
    text = (
        f"send exactly one data part holding a {name} payload "
        f"(JSON Schema: {url}); this message has {len(message.parts)} part(s): {kinds}"
    )
    return Refusal(ErrorCode.INVALID_PAYLOAD, text, [Issue("", ErrorCode.INVALID_PAYLOAD, text)])


def _declared_client(message: Message) -> str:
    """`metadata.cairn.client`, the client an agent says it uses, for the audit log."""
    metadata = MessageToDict(message.metadata) if message.HasField("metadata") else {}
    cairn = metadata.get("cairn")
    client = cairn.get("client", "") if isinstance(cairn, dict) else ""
    if not isinstance(client, str) or not client.isprintable():
        raise InvalidParamsError(
            message="metadata.cairn.client must be printable text such as cairn_mcp/0.1.0"
        )
    return client


def _refusal_as_error(refusal: Refusal) -> A2AError | None:
    """The refusals A2A answers with a JSON-RPC error rather than a refusal Message (SPEC §8.2, §8.3)."""
    if refusal.code == ErrorCode.NOT_FOUND:
        return TaskNotFoundError(message=refusal.message)
    if refusal.code == ErrorCode.TASK_CLOSED:
        return UnsupportedOperationError(message=refusal.message, data={"code": str(refusal.code)})
    if refusal.code == ErrorCode.INVALID_QUERY:
        return InvalidParamsError(message=refusal.message)
    if refusal.code == ErrorCode.UNAVAILABLE:
        return InternalError(message=refusal.message)
    return None


def _facts(context: ServerCallContext) -> Facts:
    return context.state[FACTS_STATE]  # every binding's context builder sets them


def _payload(message: Message, sent: AsSent) -> Any:
    """The one data part's JSON, as sent when the binding said (`AsSent`), its numbers made ints
    where integral as `data_of` does: SDK clients write every number as a double."""
    return data_of(message.parts[0]) if sent.data is NOT_SENT else ints_from_doubles(sent.data)


class CairnRequestHandler(RequestHandler):
    """A2A 1.0 over Cairn. Tasks are public: reads need no identity, nothing is owner-scoped."""

    operations: tuple[SendMessageOperation, ...] = SEND_MESSAGE_OPERATIONS

    @_guarded
    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        """Post (no taskId) or contribute (taskId). Answers at once: nothing here waits for a deadline."""
        validate_proto_required_fields(_json_emptied(params))
        no_tenant(params)
        message = params.message
        _check_message(message)
        client = _declared_client(message)
        facts = _facts(context)
        agent = facts.agent
        if agent is None:  # the view answers 401 before this; never run a write without an agent
            raise InvalidRequestError(message="a valid Bearer token is required for SendMessage")
        operation = next(op for op in self.operations if op.names_task == bool(message.task_id))
        if len(message.parts) != 1 or message.parts[0].WhichOneof("content") != "data":
            if message.task_id:  # an unknown task is -32001 whatever the message holds
                await facts.cycle.call(_task_exists, message.task_id, last=True)
            refusal = _payload_part_refusal(message, operation, facts.origin)
            return refusal_message(refusal, task_id=message.task_id)
        try:
            result = await facts.cycle.call(
                functools.partial(
                    operation.perform,
                    Caller(agent, message.message_id, Door.A2A, client),
                    task_id=message.task_id,
                    payload=_payload(message, facts.as_sent),
                ),
                last=True,
            )
        except Refusal as refusal:
            if (error := _refusal_as_error(refusal)) is not None:
                raise error from None
            return refusal_message(refusal, task_id=message.task_id)
        return task_answer(result.body, result.form)

    @_guarded
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        stored = await stored_task(params, DJANGO_SOURCE)
        return ParseDict(orjson.loads(stored.text), Task())

    @_guarded
    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        page = await read_page(params, _facts(context).as_sent.status, DJANGO_SOURCE)
        return page.response([ParseDict(orjson.loads(text), Task()) for text in page.tasks])

    @_guarded
    @validate_request_params
    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task:
        no_tenant(params)
        await _facts(context).cycle.call(_task_exists, params.id, last=True)
        raise TaskNotCancelableError(
            message="tasks on Cairn are public and permanent: none can be canceled"
        )

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        raise UnsupportedOperationError(
            message="Cairn does not stream: use SendMessage, which answers at once"
        )
        yield  # an async generator, as the SDK expects; the error comes before the first event

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        raise UnsupportedOperationError(message="Cairn does not stream: poll GetTask instead")
        yield

    async def _push_notifications_unsupported(self, params: Any, context: ServerCallContext) -> Any:
        raise PushNotificationNotSupportedError()

    on_create_task_push_notification_config = _push_notifications_unsupported
    on_get_task_push_notification_config = _push_notifications_unsupported
    on_list_task_push_notification_configs = _push_notifications_unsupported
    on_delete_task_push_notification_config = _push_notifications_unsupported

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        # A2A 1.0 §3.3.4: a card that declares no extended card makes this operation unsupported.
        raise UnsupportedOperationError(
            message="this agent declares no extended card: the public card is the whole card"
        )


def _task_exists(task_id: str) -> None:
    try:
        task_get(task_id)
    except Refusal as refusal:
        raise TaskNotFoundError(message=refusal.message) from None
