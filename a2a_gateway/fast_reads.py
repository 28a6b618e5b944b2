"""GetTask and ListTasks answered from the stored A2A forms, in the SDK's JSON-RPC envelope.

The SDK's dispatcher parses a read's params into a proto, asks the handler for a Task, turns it
back into JSON with `MessageToDict` and serialises the envelope: on every read, for a Task that
only changes when its task does. Here the params are parsed the same way, the handler's checks
run in the same order, and the answer is the text `a2a_gateway.stored_forms` rendered at write
time, spliced into the envelope the SDK's own `JSONRPC20Response` makes.

Where the stored text comes from is the caller's (`StoredReads`): through Django's ORM on its
thread (`DJANGO_READS`, any database), or on the event loop from `a2a_gateway.read_pool`.

Anything this path does not cover returns None and goes to the dispatcher, which answers as it
always has: every error, a tenant, `historyLength`, `includeArtifacts`, a context or timestamp
filter, an id not in canonical form, a task not rendered yet or past its deadline while open (the
handler evaluates it first, SPEC §4.3). tests/a2a/test_fast_reads.py holds both paths to the
same bytes.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, Protocol, cast

from a2a.server.request_handlers.request_handler import validate_proto_required_fields
from a2a.server.routes.common import serialize_list_tasks_response
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import InvalidParamsError, ListTasksRequest, ListTasksResponse, TaskState
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from asgiref.sync import sync_to_async
from django.core import signals
from django.db import connection
from django.db.models import Field
from django.utils import timezone
from google.protobuf.json_format import ParseDict
from jsonrpc.jsonrpc2 import JSONRPC20Response

from a2a_gateway.evaluated_forms import EVALUATED_FORMS
from a2a_gateway.handler import (
    MAX_PAGE_SIZE,
    MAX_REQUESTED_PAGE_SIZE,
    list_filter_key,
    status_filter,
)
from core.cursors import keyset_position
from core.errors import Refusal
from tasks.models import Task, TaskStatus
from tasks.rendered import RENDER_VERSION, is_rendered, json_text
from tasks.selectors import task_page

FAST_METHODS = frozenset({"GetTask", "ListTasks"})
# Where the stored tasks go: no token, size or count can hold a NUL.
_TASKS_PLACE = "\x00cairn.tasks\x00"
_ID_PLACE = "\x00cairn.id\x00"


@dataclass(frozen=True)
class PageQuery:
    """A ListTasks page the stored forms can answer: its filter, size and keyset position."""

    statuses: frozenset[str] | None
    page_size: int
    filter_key: str
    cursor: str  # "" for the first page
    after: tuple[datetime, uuid.UUID] | None  # the position the cursor holds


@dataclass(frozen=True)
class StoredTask:
    text: str  # the GetTask result: the task as the SDK serialises it
    evaluated: bool  # the text never changes again


@dataclass(frozen=True)
class StoredPage:
    tasks: list[str]  # the stored list forms, in page order
    next_cursor: str  # "" on the last page
    total: int


class StoredReads(Protocol):
    """Where GetTask and ListTasks find the stored forms; None means the dispatcher answers."""

    async def task(self, key: uuid.UUID, now: datetime) -> StoredTask | None: ...

    async def page(self, query: PageQuery, now: datetime) -> StoredPage | None: ...


@cache
def _envelope_around_id() -> tuple[str, str]:
    """The SDK's response object after its result, split where the id goes: its
    `JSONRPC20Response`, serialised as Starlette's `JSONResponse` does."""
    shell = json_text(JSONRPC20Response(result=0, _id=_ID_PLACE).data)
    head, id_place, tail = '{"result":0', json_text(_ID_PLACE), shell
    if not shell.startswith(head) or shell.count(id_place) != 1:
        raise ValueError("the SDK's envelope no longer starts with its result")
    before, after = tail[len(head) :].split(id_place)
    return before, after


def _in_envelope(request_id: Any, result: str) -> bytes:
    """The SDK's response around a result already in JSON, with the stored text in its place."""
    before, after = _envelope_around_id()
    return ('{"result":' + result + before + json_text(request_id) + after).encode()


@cache
def stored_task_sql() -> str:
    """Built once per process: the columns come from the model, quoted for the database. The
    same text runs on Django's connection and on the read pool's (`a2a_gateway.read_pool`)."""
    quote = connection.ops.quote_name
    names = ("id", "a2a_json", "rendered_version", "status", "deadline")
    column = {name: quote(cast(Field, Task._meta.get_field(name)).column or name) for name in names}
    return (
        f"SELECT {column['a2a_json']}, {column['status']} FROM {quote(Task._meta.db_table)} "
        f"WHERE {column['id']} = %s AND {column['rendered_version']} = %s "
        f"AND ({column['status']} <> %s OR {column['deadline']} > %s)"
    )


def task_key(task_id: str) -> uuid.UUID | None:
    """The id as a key, only in canonical form (any other form is the handler's to judge)."""
    try:
        key = uuid.UUID(task_id)
    except ValueError:
        return None
    return key if str(key) == task_id else None


def stored_task(key: uuid.UUID, now: datetime) -> StoredTask | None:
    """The task's stored GetTask result: one indexed query for one text column and its status.
    None for an unknown task, one not rendered yet, or one open past its deadline."""
    fields = Task._meta
    params = [
        fields.pk.get_db_prep_value(key, connection),
        RENDER_VERSION,
        TaskStatus.WORKING.value,
        fields.get_field("deadline").get_db_prep_value(now, connection),
    ]
    with connection.cursor() as cursor:
        cursor.execute(stored_task_sql(), params)
        row = cursor.fetchone()
    return None if row is None else stored_task_of(*row)


def stored_task_of(text: str, status: str) -> StoredTask:
    return StoredTask(text, evaluated=status != TaskStatus.WORKING)


def stored_page(query: PageQuery, now: datetime) -> StoredPage | None:
    """A ListTasks page from the stored list forms through the ORM, or None when the
    dispatcher must answer (something was not rendered)."""
    page = task_page(
        statuses=query.statuses,
        limit=query.page_size,
        cursor=query.cursor or None,
        filter_key=query.filter_key,
        with_evaluation=False,
        only=("rendered_version", "a2a_list_json"),
    )
    if not all(is_rendered(task) for task in page.tasks):
        return None
    return StoredPage([task.a2a_list_json for task in page.tasks], page.next_cursor, page.total)


class DjangoReads:
    """The stored reads through Django's ORM, one hop to its thread each. `in_request_cycle`:
    send Django's request signals around the read in the same hop, for a caller outside
    Django's request cycle (the ASGI app), so the connection is checked and given back."""

    def __init__(self, *, in_request_cycle: bool = False) -> None:
        self.in_request_cycle = in_request_cycle

    def _run(self, read: Any, *args: Any) -> Any:
        if not self.in_request_cycle:
            return read(*args)
        signals.request_started.send(sender=DjangoReads)
        try:
            return read(*args)
        finally:
            signals.request_finished.send(sender=DjangoReads)

    async def task(self, key: uuid.UUID, now: datetime) -> StoredTask | None:
        return await sync_to_async(self._run)(stored_task, key, now)

    async def page(self, query: PageQuery, now: datetime) -> StoredPage | None:
        return await sync_to_async(self._run)(stored_page, query, now)


DJANGO_READS = DjangoReads()


def page_query(request: ListTasksRequest, raw_params: Any) -> PageQuery | None:
    """The page a ListTasks asks for, or None when the dispatcher must answer it: artifacts, a
    context or timestamp filter, and every refusal (bad status, size or token)."""
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
    filter_key = list_filter_key(TaskState.Name(request.status), "", None)
    try:
        after = keyset_position(request.page_token, filter_key) if request.page_token else None
    except Refusal:
        return None
    return PageQuery(
        statuses=statuses,
        page_size=min(requested, MAX_PAGE_SIZE),
        filter_key=filter_key,
        cursor=request.page_token,
        after=after,
    )


def _page_result(query: PageQuery, page: StoredPage) -> str:
    """The SDK's serialisation of a ListTasks response, with the stored tasks in its list. Its
    key order depends on which fields are set, so the response it serialises has a task too."""
    response = ListTasksResponse(
        next_page_token=page.next_cursor, page_size=query.page_size, total_size=page.total
    )
    if not page.tasks:
        return json_text(serialize_list_tasks_response(response, False))
    response.tasks.add()
    result = serialize_list_tasks_response(response, False)
    result["tasks"] = _TASKS_PLACE
    return json_text(result).replace(json_text(_TASKS_PLACE), "[" + ",".join(page.tasks) + "]", 1)


async def _task_result(key: uuid.UUID, now: datetime, reads: StoredReads) -> str | None:
    """The task's GetTask result from memory when it is evaluated and was read before."""
    kept = EVALUATED_FORMS.get(key)
    if kept is not None:
        return kept
    stored = await reads.task(key, now)
    if stored is None:
        return None
    if stored.evaluated:
        EVALUATED_FORMS.keep(key, stored.text)
    return stored.text


async def fast_read(
    method: str, document: dict[str, Any], request_id: Any, reads: StoredReads = DJANGO_READS
) -> bytes | None:
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
    now = timezone.now()
    try:
        if method == "GetTask":
            key = task_key(request.id)
            result = None if key is None else await _task_result(key, now, reads)
        else:
            query = page_query(request, raw_params)
            page = None if query is None else await reads.page(query, now)
            result = None if query is None or page is None else _page_result(query, page)
    except Exception:  # the database unreachable, say: the handler answers it as SPEC §16 says
        return None
    return None if result is None else _in_envelope(request_id, result)
