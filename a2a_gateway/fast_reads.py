"""GetTask and ListTasks answered from the stored A2A forms, in the SDK's JSON-RPC envelope.

The SDK's dispatcher parses a read's params into a proto, asks the handler for a Task, turns it
back into JSON with `MessageToDict` and serialises the envelope: on every read, for a Task that
only changes when its task does. Here the params are parsed the same way, the handler's checks
run in the same order, and the answer is the text `a2a_gateway.stored_forms` rendered at write
time, spliced into the envelope the SDK's own `JSONRPC20Response` makes.

Anything this path does not cover returns None and goes to the dispatcher, which answers as it
always has: every error, a tenant, `historyLength`, `includeArtifacts`, a context or timestamp
filter, an id not in canonical form, a task not rendered yet or past its deadline while open (the
handler evaluates it first, SPEC §4.3). tests/a2a/test_fast_reads.py holds both paths to the
same bytes.
"""

from __future__ import annotations

import uuid
from functools import cache
from typing import Any, cast

from a2a.server.request_handlers.request_handler import validate_proto_required_fields
from a2a.server.routes.common import serialize_list_tasks_response
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import InvalidParamsError, ListTasksRequest, ListTasksResponse, TaskState
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from asgiref.sync import sync_to_async
from django.db import connection
from django.db.models import Field
from django.utils import timezone
from google.protobuf.json_format import ParseDict
from jsonrpc.jsonrpc2 import JSONRPC20Response

from a2a_gateway.handler import (
    MAX_PAGE_SIZE,
    MAX_REQUESTED_PAGE_SIZE,
    list_filter_key,
    status_filter,
)
from core.errors import Refusal
from tasks.models import Task, TaskStatus
from tasks.rendered import RENDER_VERSION, is_rendered, json_text
from tasks.selectors import task_page

FAST_METHODS = frozenset({"GetTask", "ListTasks"})
_RESULT_SHELL = '{"result":0'
# Where the stored tasks go: no token, size or count can hold a NUL.
_TASKS_PLACE = "\x00cairn.tasks\x00"


def _in_envelope(request_id: Any, result: str) -> bytes:
    """The SDK's response object around a result already in JSON: its `JSONRPC20Response`,
    serialised as Starlette's `JSONResponse` does, with the stored text in the result's place."""
    shell = json_text(JSONRPC20Response(result=0, _id=request_id).data)
    if not shell.startswith(_RESULT_SHELL):
        raise ValueError("the SDK's envelope no longer starts with its result")
    return ('{"result":' + result + shell[len(_RESULT_SHELL) :]).encode()


@cache
def _stored_task_sql() -> str:
    """Built once per process: the columns come from the model, quoted for the database."""
    quote = connection.ops.quote_name
    names = ("id", "a2a_json", "rendered_version", "status", "deadline")
    column = {name: quote(cast(Field, Task._meta.get_field(name)).column or name) for name in names}
    return (
        f"SELECT {column['a2a_json']} FROM {quote(Task._meta.db_table)} "
        f"WHERE {column['id']} = %s AND {column['rendered_version']} = %s "
        f"AND ({column['status']} <> %s OR {column['deadline']} > %s)"
    )


def stored_task(task_id: str) -> str | None:
    """The task's stored GetTask result: one indexed query for one text column. None for an id
    not in canonical form, an unknown task, one not rendered yet, or one open past its deadline."""
    try:
        key = uuid.UUID(task_id)
    except ValueError:
        return None
    if str(key) != task_id:
        return None
    fields = Task._meta
    params = [
        fields.pk.get_db_prep_value(key, connection),
        RENDER_VERSION,
        TaskStatus.WORKING.value,
        fields.get_field("deadline").get_db_prep_value(timezone.now(), connection),
    ]
    with connection.cursor() as cursor:
        cursor.execute(_stored_task_sql(), params)
        row = cursor.fetchone()
    return row[0] if row else None


def stored_page(request: ListTasksRequest, raw_params: Any) -> str | None:
    """A ListTasks result from the stored list forms, or None when the dispatcher must answer."""
    if (
        request.include_artifacts
        or request.context_id
        or request.HasField("status_timestamp_after")
    ):
        return None
    try:
        statuses = status_filter(request, raw_params)
    except InvalidParamsError:
        return None
    requested = request.page_size if request.HasField("page_size") else DEFAULT_LIST_TASKS_PAGE_SIZE
    if not 1 <= requested <= MAX_REQUESTED_PAGE_SIZE:
        return None
    page_size = min(requested, MAX_PAGE_SIZE)
    try:
        page = task_page(
            statuses=statuses,
            limit=page_size,
            cursor=request.page_token or None,
            filter_key=list_filter_key(TaskState.Name(request.status), "", None),
            with_evaluation=False,
            only=("rendered_version", "a2a_list_json"),
        )
    except Refusal:
        return None
    if not all(is_rendered(task) for task in page.tasks):
        return None
    return _page_result(
        [task.a2a_list_json for task in page.tasks], page.next_cursor, page_size, page.total
    )


def _page_result(tasks: list[str], next_page_token: str, page_size: int, total: int) -> str:
    """The SDK's serialisation of a ListTasks response, with the stored tasks in its list. Its
    key order depends on which fields are set, so the response it serialises has a task too."""
    response = ListTasksResponse(
        next_page_token=next_page_token, page_size=page_size, total_size=total
    )
    if not tasks:
        return json_text(serialize_list_tasks_response(response, False))
    response.tasks.add()
    result = serialize_list_tasks_response(response, False)
    result["tasks"] = _TASKS_PLACE
    return json_text(result).replace(json_text(_TASKS_PLACE), "[" + ",".join(tasks) + "]", 1)


async def fast_read(method: str, document: dict[str, Any], request_id: Any) -> bytes | None:
    """The reply body to a GetTask or ListTasks whose envelope, version and params shape the
    endpoint has checked, or None when the SDK's dispatcher is to answer it."""
    raw_params = document.get("params", {})
    try:
        request = ParseDict(
            raw_params, JsonRpcDispatcher.METHOD_TO_MODEL[method](), ignore_unknown_fields=True
        )
        validate_proto_required_fields(request)
    except Exception:  # whatever the SDK would refuse, it refuses in its own words
        return None
    if request.tenant or request.HasField("history_length"):
        return None
    try:
        if method == "GetTask":
            result = await sync_to_async(stored_task)(request.id)
        else:
            result = await sync_to_async(stored_page)(request, raw_params)
    except Exception:  # the database unreachable, say: the handler answers it as SPEC §16 says
        return None
    return None if result is None else _in_envelope(request_id, result)
