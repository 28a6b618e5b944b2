"""GetTask, ListTasks and A2A 0.3's tasks/get in each binding's wrapping, around the one read
(`a2a_gateway.stored_reads`): the params parsed as the SDK's dispatcher parses them, the stored
text wrapped as it is rather than parsed into a Task and written out again. A refused read raises
the SDK's error, which each binding writes as its dispatcher would. None leaves the request to the
dispatcher: params the SDK refuses in its own words, or a read the pool could not make.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

import orjson
from a2a.compat.v0_3 import conversions
from a2a.compat.v0_3 import types as types_v03
from a2a.compat.v0_3.jsonrpc_adapter import _to_v03_jsonrpc_error
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.server.routes.common import serialize_list_tasks_response
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import GetTaskRequest, ListTasksRequest
from a2a.utils.constants import VERSION_HEADER
from a2a.utils.errors import A2AError
from a2a.utils.proto_utils import parse_params
from django.db import DatabaseError
from google.protobuf.json_format import ParseDict, ParseError
from pydantic import ValidationError
from starlette.datastructures import QueryParams

from a2a_gateway.handler import failure_error
from a2a_gateway.read_connections import Unavailable
from a2a_gateway.stored_reads import (
    DJANGO_SOURCE,
    Source,
    StoredPage,
    StoredTask,
    stored_read,
    stored_task,
)
from a2a_gateway.transport import json_bytes
from core.caching import Shown

T = TypeVar("T")
V0_3_GET_TASK = "tasks/get"
FAST_METHODS = frozenset({"GetTask", "ListTasks", V0_3_GET_TASK})


def _in_envelope(request_id: Any, result: Any) -> bytes | None:
    """JSON-RPC's response around the result (stored JSON as `orjson.Fragment`s); None for an id
    orjson cannot write (an int beyond 64 bits), which the dispatcher then answers."""
    try:
        return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})
    except TypeError:
        return None


async def read_here(read: Awaitable[T]) -> T | None:
    """The stored read, or None when the pool could not read; a database failure raises
    `failure_error`'s error."""
    try:
        return await read
    except Unavailable:
        return None
    except DatabaseError as exc:
        raise failure_error(exc, "read") from None


def _result(read: StoredTask | StoredPage) -> Any:
    """The read's result as the SDK's serialiser writes it, the stored forms as they are."""
    if isinstance(read, StoredTask):
        return orjson.Fragment(read.text)
    result = serialize_list_tasks_response(read.response(), read.include_artifacts)
    result["tasks"] = [orjson.Fragment(text) for text in read.tasks]
    return result


async def _v0_3_read(document: dict[str, Any], request_id: Any, source: Source) -> bytes | None:
    """The reply body to a 0.3 tasks/get, its request read and its error written as the SDK's
    0.3 adapter does (its conversion to 1.0's GetTaskRequest reads a `historyLength` of 0 as none)."""
    try:
        parsed = types_v03.GetTaskRequest.model_validate(document)  # the adapter's model
    except ValidationError:  # the adapter refuses it in its own words
        return None
    request = conversions.to_core_get_task_request(parsed)
    try:
        read = await read_here(stored_task(request, source, "0.3"))
    except A2AError as refused:
        error = _to_v03_jsonrpc_error(refused).model_dump(by_alias=True)
        return json_bytes({"jsonrpc": "2.0", "id": request_id, "error": error})
    return None if read is None else _in_envelope(request_id, orjson.Fragment(read.text))


async def fast_read(
    method: str, document: dict[str, Any], request_id: Any, source: Source = DJANGO_SOURCE
) -> bytes | None:
    """The reply body to a GetTask, ListTasks or 0.3 tasks/get whose envelope, version and params'
    shape the endpoint has checked."""
    if method == V0_3_GET_TASK:
        return await _v0_3_read(document, request_id, source)
    params = document.get("params", {})
    try:
        request = ParseDict(
            params, JsonRpcDispatcher.METHOD_TO_MODEL[method](), ignore_unknown_fields=True
        )
    except ParseError:  # the SDK refuses it in its own words
        return None
    sent_status = params.get("status") if isinstance(params, dict) else None
    try:
        read = await read_here(stored_read(request, sent_status, source))
    except A2AError as refused:
        return json_bytes(build_error_response(request_id, refused))
    return None if read is None else _in_envelope(request_id, _result(read))


def _shown(read: StoredTask | StoredPage) -> Shown:
    """What an HTTP+JSON read's answer shows, for a cache; it varies by `A2A-Version` (another
    version gets an error)."""
    if isinstance(read, StoredTask):
        return Shown.task(read.open_until, vary=(VERSION_HEADER,))
    return Shown.listing(read.open_until, vary=(VERSION_HEADER,))


async def fast_rest_read(
    request: GetTaskRequest | ListTasksRequest,
    query: QueryParams,
    task_id: str | None,
    sent_status: Any,
    source: Source = DJANGO_SOURCE,
) -> tuple[bytes, Shown] | None:
    """The body of an HTTP+JSON `GET /tasks/{id}` (`task_id`) or `GET /tasks` whose version the
    binding has checked, its query read into `request` as the SDK's REST dispatcher reads it, and
    what it shows."""
    try:
        parse_params(query, request)
    except ParseError:  # the SDK refuses it in its own words
        return None
    if isinstance(request, GetTaskRequest) and task_id is not None:
        request.id = task_id  # the path's id wins over a query's, as in the SDK's dispatcher
    read = await read_here(stored_read(request, sent_status, source))
    return None if read is None else (orjson.dumps(_result(read)), _shown(read))
