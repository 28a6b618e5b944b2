"""The SDK's `RequestHandler`, implemented over Cairn's services and selectors.

It translates and nothing more: protocol checks (the shape of a message, page sizes, filters) stay
here, every rule of the domain stays in the services, and a `Refusal` is turned into its A2A form
once. No SDK task store and no `AgentExecutor`: tasks are public rows, read through the selectors.
"""

from __future__ import annotations

import functools
import json
import logging
import unicodedata
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC
from typing import Any, TypeVar

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import RequestHandler
from a2a.server.request_handlers.request_handler import validate_request_params
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
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
    TaskPushNotificationConfig,
    TaskState,
    UnsupportedOperationError,
)
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import A2AError
from a2a.utils.proto_utils import validate_proto_required_fields
from a2a.utils.task import validate_history_length
from asgiref.sync import sync_to_async
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict

from a2a_gateway.operations import SEND_MESSAGE_OPERATIONS, SendMessageOperation
from a2a_gateway.translate import (
    data_of,
    ints_from_doubles,
    refusal_message,
    task_from_body,
    task_from_view,
)
from agents.models import Agent
from calls.published_schemas import published_schema_url
from core.errors import ErrorCode, Issue, Refusal
from core.outages import outage_refusal
from core.policy import A2A_TASK_STATES, PAGE_CAP
from tasks.selectors import task_get, task_page, task_view

logger = logging.getLogger(__name__)

# Keys of ServerCallContext.state, filled by the endpoint's context builder.
AGENT_STATE = "cairn.agent"  # the Agent of a valid Bearer token, when the method needs one
AS_SENT_STATE = "cairn.as_sent"  # `AsSent`: what the SDK's parse into a proto loses
ORIGIN_STATE = "cairn.origin"  # the site's origin, for the links a refusal gives

MAX_PAGE_SIZE = PAGE_CAP
MAX_REQUESTED_PAGE_SIZE = 100  # what A2A lets a client ask for
MAX_MESSAGE_ID = 128
PART_KINDS = {"text": "text", "raw": "file", "url": "file", "data": "data", None: "empty"}
STATUS_FILTERS: dict[int, frozenset[str] | None] = {
    TaskState.TASK_STATE_UNSPECIFIED: None,
    **{TaskState.Value(name): statuses for name, statuses in A2A_TASK_STATES.items()},
}

Method = TypeVar("Method", bound=Callable[..., Awaitable[Any]])
# A value a client did not send at all.
NOT_SENT: Any = object()


@dataclass(frozen=True)
class AsSent:
    """The two values of a request that the SDK's parse into a proto loses, as the client wrote
    them: a ListTasks `status` (the parser reads an unknown name as "no filter", which SPEC §8.5
    refuses) and a SendMessage's first data part (read as JSON: converting it back from the proto
    cost 68 µs against 9, bench/README.md F22)."""

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


def _guarded(method: Method) -> Method:
    """Let A2A errors through; turn anything else into a -32603 that says only what a client can
    act on (the database is unavailable: retry), so no Python text leaks."""

    @functools.wraps(method)
    async def wrapper(self: RequestHandler, params: Any, context: ServerCallContext) -> Any:
        try:
            return await method(self, params, context)
        except A2AError:
            raise
        except Exception as exc:
            outage = outage_refusal(exc)
            if outage is not None:
                raise InternalError(message=outage.message) from None
            logger.exception("A2A %s failed", method.__name__)
            raise InternalError() from None

    return wrapper  # type: ignore[return-value]


def _required_fields_checked(method: Method) -> Method:
    """The SDK's `validate_request_params` for SendMessage, run on a copy of the request whose JSON
    values (data parts, metadata) are emptied. A `Struct` or `Value` has no REQUIRED field, so the
    SDK finds the same errors without walking a payload value by value in Python: 823 → 237 µs
    for a contribution (bench/README.md, F17)."""

    @functools.wraps(method)
    async def wrapper(self: RequestHandler, params: Any, context: ServerCallContext) -> Any:
        validate_proto_required_fields(_json_emptied(params))
        return await method(self, params, context)

    return wrapper  # type: ignore[return-value]


def _json_emptied(request: SendMessageRequest) -> SendMessageRequest:
    shell = SendMessageRequest()
    shell.CopyFrom(request)
    holders: list[SendMessageRequest | Message | Part] = [
        shell,
        shell.message,
        *shell.message.parts,
    ]
    for holder in holders:
        if holder.HasField("metadata"):
            holder.metadata.Clear()
            holder.metadata.SetInParent()
    for part in shell.message.parts:
        if part.HasField("data"):
            part.data.null_value = struct_pb2.NULL_VALUE
    return shell


def _no_tenant(params: Any) -> None:
    if params.tenant:
        raise InvalidParamsError(message="this server has no tenants: leave tenant empty")


def _is_uuid(text: str) -> bool:
    try:
        return str(uuid.UUID(text)) == text.lower()
    except ValueError:
        return False


def _is_message_id(text: str) -> bool:
    """1..128 characters, none a control character: any id a client makes (the SDKs send UUIDs)."""
    return 1 <= len(text) <= MAX_MESSAGE_ID and not any(
        unicodedata.category(char) == "Cc" for char in text
    )


def _check_message(message: Message) -> None:
    """The shape of a message Cairn can read (SPEC §8.2); what its payload says is for the services."""
    if not _is_message_id(message.message_id):
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
    """A message that is not exactly one data part is refused as an invalid payload, not as a
    protocol error, so a generic client (or an LLM saying "hello") learns what Cairn reads."""
    kinds = ", ".join(PART_KINDS[part.WhichOneof("content")] for part in message.parts)
    url = published_schema_url(operation.payload_model, origin=origin)
    text = (
        f"send exactly one data part holding a {operation.schema_name} payload "
        f"(JSON Schema: {url}); this message has {len(message.parts)} part(s): {kinds}"
    )
    return Refusal(ErrorCode.INVALID_PAYLOAD, text, [Issue("", ErrorCode.INVALID_PAYLOAD, text)])


def _declared_client(message: Message) -> str:
    """`metadata.cairn.client`, the client an agent says it uses; it goes to the audit log."""
    metadata = MessageToDict(message.metadata) if message.HasField("metadata") else {}
    cairn = metadata.get("cairn")
    client = cairn.get("client", "") if isinstance(cairn, dict) else ""
    if not isinstance(client, str) or not client.isprintable():
        raise InvalidParamsError(
            message="metadata.cairn.client must be printable text such as cairn_mcp/0.1.0"
        )
    return client


# What `status` may say for "no filter". "UNRECOGNIZED" is what the official JS client (@a2a-js/sdk
# 1.3.0, ts-proto) writes when its caller leaves `status` out, so it means unset, not unknown.
UNSET_STATUS = (None, 0, "TASK_STATE_UNSPECIFIED", "UNRECOGNIZED")


def status_filter(params: ListTasksRequest, sent_status: Any) -> frozenset[str] | None:
    """The statuses a ListTasks filters by; `sent_status` is its `status` as the client wrote it."""
    # The SDK's parser reads an unknown enum name as UNSPECIFIED (no filter); refuse it instead.
    swallowed = (
        params.status == TaskState.TASK_STATE_UNSPECIFIED and sent_status not in UNSET_STATUS
    )
    if swallowed or params.status not in STATUS_FILTERS:
        raise InvalidParamsError(message=f"status must be {', '.join(A2A_TASK_STATES)} or unset")
    return STATUS_FILTERS[params.status]


def _refusal_as_error(refusal: Refusal) -> A2AError | None:
    """The refusals A2A answers with a JSON-RPC error rather than a refusal Message (SPEC §8.2, §8.3)."""
    if refusal.code == ErrorCode.NOT_FOUND:
        return TaskNotFoundError(message=refusal.message)
    if refusal.code == ErrorCode.TASK_CLOSED:
        return UnsupportedOperationError(message=refusal.message, data={"code": str(refusal.code)})
    if refusal.code == ErrorCode.INVALID_QUERY:
        return InvalidParamsError(message=refusal.message)
    return None


def _as_error(refusal: Refusal) -> A2AError:
    """For reads: the JSON-RPC error of a refusal a selector raised."""
    error = _refusal_as_error(refusal)
    if error is None:
        raise refusal  # not a refusal a read can give: an internal error
    return error


def _payload(message: Message, context: ServerCallContext) -> Any:
    """The one data part's JSON as sent (`AsSent`), its numbers made ints where integral, as
    `data_of` does: SDK clients write every number as a double. Converted back from the proto
    when the caller did not say what was sent."""
    sent = context.state.get(AS_SENT_STATE)
    if not isinstance(sent, AsSent) or sent.data is NOT_SENT:
        return data_of(message.parts[0])
    return ints_from_doubles(sent.data)


class CairnRequestHandler(RequestHandler):
    """A2A 1.0 over Cairn. Tasks are public, so reads need no identity and nothing is owner-scoped."""

    operations: tuple[SendMessageOperation, ...] = SEND_MESSAGE_OPERATIONS

    @classmethod
    def operation_for(cls, message: Message) -> SendMessageOperation:
        names_task = bool(message.task_id)
        return next(operation for operation in cls.operations if operation.names_task == names_task)

    @_guarded
    @_required_fields_checked
    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        """Post (no taskId) or contribute (taskId). Answers at once: nothing here waits for a deadline."""
        _no_tenant(params)
        message = params.message
        _check_message(message)
        client = _declared_client(message)
        agent: Agent | None = context.state.get(AGENT_STATE)
        if agent is None:  # the view answers 401 before this; never run a write without an agent
            raise InvalidRequestError(message="a valid Bearer token is required for SendMessage")
        operation = self.operation_for(message)
        if len(message.parts) != 1 or message.parts[0].WhichOneof("content") != "data":
            if message.task_id:  # an unknown task is -32001 whatever the message holds
                await sync_to_async(_task)(message.task_id)
            refusal = _payload_part_refusal(message, operation, context.state.get(ORIGIN_STATE, ""))
            return refusal_message(refusal, task_id=message.task_id)
        try:
            result = await sync_to_async(operation.perform)(
                agent=agent,
                task_id=message.task_id,
                payload=_payload(message, context),
                operation_id=message.message_id,
                client=client,
            )
        except Refusal as refusal:
            error = _refusal_as_error(refusal)
            if error is not None:
                raise error from None
            return refusal_message(refusal, task_id=message.task_id)
        return task_from_body(result.body)

    @_guarded
    @validate_request_params
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        _no_tenant(params)
        validate_history_length(params)
        return await sync_to_async(_task)(params.id)

    @_guarded
    @validate_request_params
    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        _no_tenant(params)
        validate_history_length(params)
        sent = context.state.get(AS_SENT_STATE)
        statuses = status_filter(params, sent.status if isinstance(sent, AsSent) else None)
        requested = (
            params.page_size if params.HasField("page_size") else DEFAULT_LIST_TASKS_PAGE_SIZE
        )
        if not 1 <= requested <= MAX_REQUESTED_PAGE_SIZE:
            raise InvalidParamsError(
                message=f"pageSize must be between 1 and {MAX_REQUESTED_PAGE_SIZE}"
            )
        # A2A lets a server return fewer than asked; the response says how many a page holds.
        page_size = min(requested, MAX_PAGE_SIZE)
        after = (
            params.status_timestamp_after.ToDatetime(tzinfo=UTC)
            if params.HasField("status_timestamp_after")
            else None
        )
        return await sync_to_async(_task_list)(
            statuses=statuses,
            status_name=TaskState.Name(params.status),
            page_size=page_size,
            page_token=params.page_token,
            context_id=params.context_id,
            after=after,
            include_artifacts=params.include_artifacts,
        )

    @_guarded
    @validate_request_params
    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task:
        _no_tenant(params)
        await sync_to_async(_task)(params.id)
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

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError()

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError()

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError()

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError()

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        # A2A 1.0 §3.3.4: a card that declares no extended card makes this operation unsupported.
        raise UnsupportedOperationError(
            message="this agent declares no extended card: the public card is the whole card"
        )


def _task(task_id: str) -> Task:
    try:
        return task_from_view(task_view(task_get(task_id)))
    except Refusal as refusal:
        raise _as_error(refusal) from None


def list_filter_key(status_name: str, context_id: str, after: Any) -> str:
    """What a ListTasks page token is bound to: it only works with its own filter (SPEC §8.5)."""
    return json.dumps(
        ["a2a.ListTasks", status_name, context_id.lower(), after.isoformat() if after else ""],
        separators=(",", ":"),
    )


def _task_list(
    *,
    statuses: frozenset[str] | None,
    status_name: str,
    page_size: int,
    page_token: str,
    context_id: str,
    after: Any,
    include_artifacts: bool,
) -> ListTasksResponse:
    if context_id and not _is_uuid(context_id):  # no task has this context: an empty, final page
        return ListTasksResponse(tasks=[], next_page_token="", page_size=page_size, total_size=0)
    filter_key = list_filter_key(status_name, context_id, after)
    try:
        page = task_page(
            statuses=statuses,
            limit=page_size,
            cursor=page_token or None,
            filter_key=filter_key,
            context_id=uuid.UUID(context_id) if context_id else None,
            status_timestamp_after=after,
            # Without includeArtifacts the SDK's serialiser drops the artifacts: the evaluations
            # (the largest part of an evaluated task) are then neither loaded nor converted.
            with_evaluation=include_artifacts,
        )
    except Refusal as refusal:
        raise _as_error(refusal) from None
    return ListTasksResponse(
        tasks=[
            task_from_view(task_view(task, with_evaluation=include_artifacts))
            for task in page.tasks
        ],
        next_page_token=page.next_cursor,
        page_size=page_size,
        total_size=page.total,
    )
