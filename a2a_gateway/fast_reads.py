"""GetTask and ListTasks, and A2A 0.3's tasks/get, answered from the A2A door's read model, in
each binding's wrapping.

The SDK's dispatcher parses a read's params into a proto, asks the handler for a Task and turns
it back into JSON with `MessageToDict`, on every read, for a Task that only changes when its task
does. Here the params are parsed the same way, the handler's checks run in the same order, and
the result is the stored form (`a2a_gateway.read_model`): `stored_result` decides and reads for
every binding; JSON-RPC wraps it in its envelope, HTTP+JSON serves it as is, and 0.3's tasks/get
turns the stored Task into 0.3's with the SDK's own conversion (once per stored form:
`a2a_gateway.converted_forms`) and writes it as the SDK's 0.3 adapter does.

Where the stored form comes from is the caller's (`StoredReads`): through Django's connection on
its thread (`read_model.DJANGO_READS`, any database), or on the event loop from
`a2a_gateway.read_pool`; both run the same statements.

Anything this path does not cover returns None and goes to the dispatcher (0.3's to the SDK's 0.3
adapter), which answers as it always has: every error, a tenant, `historyLength` (in 0.3 one
other than 0, which the adapter reads as none), `includeArtifacts`, a context or timestamp
filter, an id not in canonical form, a task whose form is not current or that is open past its
deadline (the handler evaluates it first, SPEC §4.3). tests/a2a/test_fast_reads.py holds both
paths to the same JSON, over every binding.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson
from a2a.compat.v0_3 import conversions
from a2a.compat.v0_3 import types as types_v03
from a2a.server.routes.common import serialize_list_tasks_response
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import (
    GetTaskRequest,
    InvalidParamsError,
    ListTasksRequest,
    ListTasksResponse,
    Task,
    TaskState,
)
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.proto_utils import parse_params
from django.utils import timezone
from google.protobuf.json_format import ParseDict
from starlette.datastructures import QueryParams

from a2a_gateway.converted_forms import ConvertedForms
from a2a_gateway.evaluated_forms import EVALUATED_FORMS
from a2a_gateway.handler import (
    MAX_PAGE_SIZE,
    MAX_REQUESTED_PAGE_SIZE,
    list_filter_key,
    status_filter,
)
from a2a_gateway.read_model import DJANGO_READS, PageQuery, StoredPage, StoredReads
from core.cursors import keyset_position
from core.errors import Refusal

V0_3_GET_TASK = "tasks/get"
FAST_METHODS = frozenset({"GetTask", "ListTasks", V0_3_GET_TASK})


def task_key(task_id: str) -> uuid.UUID | None:
    """The id as a key, only in canonical form (any other form is the handler's to judge)."""
    try:
        key = uuid.UUID(task_id)
    except ValueError:
        return None
    return key if str(key) == task_id else None


def page_query(request: ListTasksRequest, sent_status: Any) -> PageQuery | None:
    """The page a ListTasks asks for, or None when the dispatcher must answer it: artifacts, a
    context or timestamp filter, and every refusal (bad status, size or token)."""
    if (
        request.include_artifacts
        or request.context_id
        or request.HasField("status_timestamp_after")
    ):
        return None
    try:
        statuses = status_filter(request, sent_status)
    except InvalidParamsError:
        return None
    if statuses is not None and len(statuses) != 1:
        return None  # no A2A state names two statuses; the handler would serve one that did
    requested = request.page_size if request.HasField("page_size") else DEFAULT_LIST_TASKS_PAGE_SIZE
    if not 1 <= requested <= MAX_REQUESTED_PAGE_SIZE:
        return None
    filter_key = list_filter_key(TaskState.Name(request.status), "", None)
    try:
        after = keyset_position(request.page_token, filter_key) if request.page_token else None
    except Refusal:
        return None
    return PageQuery(
        status=None if statuses is None else next(iter(statuses)),
        page_size=min(requested, MAX_PAGE_SIZE),
        filter_key=filter_key,
        after=after,
    )


def _page_result(query: PageQuery, page: StoredPage) -> dict[str, Any]:
    """The ListTasks response as the SDK's serialiser writes it, the stored entries its tasks."""
    response = ListTasksResponse(
        next_page_token=page.next_cursor, page_size=query.page_size, total_size=page.total
    )
    result = serialize_list_tasks_response(response, False)
    result["tasks"] = [orjson.Fragment(text) for text in page.tasks]
    return result


def _in_envelope(request_id: Any, result: Any) -> bytes | None:
    """JSON-RPC's response around the result (stored JSON as `orjson.Fragment`s); None for an id
    orjson cannot write (an int beyond 64 bits), which the dispatcher then answers."""
    try:
        return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})
    except TypeError:
        return None


async def _stored_task(key: uuid.UUID, now: datetime, reads: StoredReads) -> str | None:
    """The task's stored Task JSON, from memory when it is evaluated and was read before."""
    kept = EVALUATED_FORMS.get(key)
    if kept is not None:
        return kept
    stored = await reads.task(key, now)
    if stored is None:
        return None
    if stored.evaluated:
        EVALUATED_FORMS.keep(key, stored.text)
    return stored.text


def as_stored(key: uuid.UUID, text: str) -> str:
    """A 1.0 binding's Task: the stored form itself."""
    return text


def v0_3_task(text: str) -> str:
    """The stored Task JSON as the SDK's 0.3 adapter writes a handler's Task: the 1.0 proto,
    turned into 0.3's Task by the SDK's conversion and dumped as the adapter dumps its result."""
    task = conversions.to_compat_task(ParseDict(orjson.loads(text), Task()))
    return orjson.dumps(task.model_dump(mode="json", by_alias=True, exclude_none=True)).decode()


V0_3_TASKS = ConvertedForms(v0_3_task)


async def stored_result(
    request: GetTaskRequest | ListTasksRequest,
    sent_status: Any,
    reads: StoredReads,
    task_form: Callable[[uuid.UUID, str], str] = as_stored,
) -> Any:
    """A parsed GetTask's or ListTasks' result from the stored forms, as the binding writes it
    (its JSON as `orjson.Fragment`s), or None when the SDK's dispatcher is to answer it.
    `sent_status` is ListTasks' `status` as the client wrote it (the handler's `AsSent`);
    `task_form` writes a GetTask's Task from the task's id and stored form (A2A 0.3:
    `V0_3_TASKS.of`)."""
    # The handler's required-field check is not run again here (it cost a tenth of a read): the
    # one REQUIRED field of either request is GetTask's `id`, and only a canonical task id is
    # served (`task_key`); the differential tests would see a field the SDK came to require.
    if request.tenant or request.HasField("history_length"):
        return None
    now = timezone.now()
    try:
        if isinstance(request, GetTaskRequest):
            key = task_key(request.id)
            if key is None:
                return None
            text = await _stored_task(key, now, reads)
            return None if text is None else orjson.Fragment(task_form(key, text))
        query = page_query(request, sent_status)
        page = None if query is None else await reads.page(query, now)
        return None if query is None or page is None else _page_result(query, page)
    except Exception:  # the database unreachable, say: the handler answers it as SPEC §16 says
        return None


async def _v0_3_read(document: dict[str, Any], request_id: Any, reads: StoredReads) -> bytes | None:
    """The reply body to a 0.3 tasks/get: its request read as the SDK's 0.3 adapter reads it (its
    model, then its conversion to 1.0's GetTaskRequest, where a `historyLength` of 0 is none), the
    Task written as the adapter writes it (`v0_3_task`), in the same JSON-RPC envelope: its
    request's id is never null, so the adapter writes all three members too. None when the
    adapter is to answer it."""
    try:
        parsed = types_v03.GetTaskRequest.model_validate(document)  # the adapter's model
        request = conversions.to_core_get_task_request(parsed)
    except Exception:  # whatever the adapter would refuse, it refuses in its own words
        return None
    result = await stored_result(request, None, reads, V0_3_TASKS.of)
    return None if result is None else _in_envelope(request_id, result)


async def fast_read(
    method: str, document: dict[str, Any], request_id: Any, reads: StoredReads = DJANGO_READS
) -> bytes | None:
    """The reply body to a GetTask, ListTasks or 0.3 tasks/get whose envelope and version (1.0:
    and params shape) the endpoint has checked, or None when the SDK's dispatcher is to answer it."""
    if method == V0_3_GET_TASK:
        return await _v0_3_read(document, request_id, reads)
    params = document.get("params", {})
    try:
        request = ParseDict(
            params, JsonRpcDispatcher.METHOD_TO_MODEL[method](), ignore_unknown_fields=True
        )
    except Exception:  # whatever the SDK would refuse, it refuses in its own words
        return None
    sent_status = params.get("status") if isinstance(params, dict) else None
    result = await stored_result(request, sent_status, reads)
    return None if result is None else _in_envelope(request_id, result)


async def fast_rest_read(
    request: GetTaskRequest | ListTasksRequest,
    query: QueryParams,
    task_id: str | None,
    sent_status: Any,
    reads: StoredReads = DJANGO_READS,
) -> bytes | None:
    """The body of an HTTP+JSON `GET /tasks/{id}` (`task_id`) or `GET /tasks` whose version the
    binding has checked, its query read as the SDK's REST dispatcher reads it into `request`:
    the result as is, without an envelope; None when the dispatcher is to answer it."""
    try:
        parse_params(query, request)
    except Exception:  # whatever the SDK would refuse, it refuses in its own words
        return None
    if isinstance(request, GetTaskRequest) and task_id is not None:
        request.id = task_id  # the path's id wins over a query's, as in the SDK's dispatcher
    result = await stored_result(request, sent_status, reads)
    return None if result is None else orjson.dumps(result)
