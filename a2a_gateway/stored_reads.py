"""The one read of the A2A door: GetTask and a ListTasks page, for every binding and the SDK's
request handler, from the text `stored_forms` wrote. One statement reads it and says whether it is
due (`tasks.due.DUE`); the domain then evaluates it (the one write a read makes) and the statement
runs again, so no read shows a task open past its deadline and none renders a Task.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache, partial
from typing import Any

import psycopg
from a2a.types import (
    GetTaskRequest,
    InvalidParamsError,
    ListTasksRequest,
    ListTasksResponse,
    Task,
    TaskNotFoundError,
    TaskState,
)
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.proto_utils import validate_proto_required_fields
from a2a.utils.task import validate_history_length
from django.db import DEFAULT_DB_ALIAS, DatabaseError
from django.utils import timezone

from a2a_gateway.kept_forms import EVALUATED_FORMS
from a2a_gateway.models import TaskForm
from a2a_gateway.request_cycle import DjangoCycle, Result
from core import replicas, statements
from core.cursors import keyset_cursor, keyset_position
from core.errors import Refusal
from core.policy import A2A_TASK_STATES, PAGE_CAP
from tasks.counts import total_params, total_sql
from tasks.due import DUE, PAST_DEADLINE
from tasks.evaluation import task_evaluate, tasks_evaluate_due
from tasks.models import TaskStatus

MAX_REQUESTED_PAGE_SIZE = 100  # what A2A lets a client ask for
STATUS_FILTERS: dict[int, str | None] = {
    TaskState.TASK_STATE_UNSPECIFIED: None,
    **{TaskState.Value(name): status for name, (status,) in A2A_TASK_STATES.items()},
}
# What `status` may say for "no filter". "UNRECOGNIZED" is what the official JS client (@a2a-js/sdk
# 1.3.0, ts-proto) writes when its caller leaves `status` out, so it means unset, not unknown.
UNSET_STATUS = (None, 0, "TASK_STATE_UNSPECIFIED", "UNRECOGNIZED")
TASK_FORMS = {"1.0": "task_json", "0.3": "task_v0_3_json"}
# What a page row holds of its task before its stored form, as `DjangoSource.read_back` reads it.
PAGE_COLUMNS = ("task", "status_timestamp", "deadline")
# Where a task's row and a page's first row say whether what they read is due (`DUE`) and
# whether a replica may be behind the primary on it (`PAST_DEADLINE`).
DUE_AT, PAST_DEADLINE_AT = 0, 1

Row = tuple[Any, ...]


def no_tenant(request: Any) -> None:
    if request.tenant:
        raise InvalidParamsError(message="this server has no tenants: leave tenant empty")


def _common_checks(request: GetTaskRequest | ListTasksRequest) -> None:
    """What every read checks first, in the order the SDK's handler would."""
    validate_proto_required_fields(request)
    no_tenant(request)
    validate_history_length(request)


def status_filter(request: ListTasksRequest, sent_status: Any) -> str | None:
    """The status a ListTasks filters by; `sent_status` is its `status` as the client wrote it."""
    # The SDK's parser reads an unknown enum name as UNSPECIFIED (no filter); refuse it instead.
    swallowed = (
        request.status == TaskState.TASK_STATE_UNSPECIFIED and sent_status not in UNSET_STATUS
    )
    if swallowed or request.status not in STATUS_FILTERS:
        raise InvalidParamsError(message=f"status must be {', '.join(A2A_TASK_STATES)} or unset")
    return STATUS_FILTERS[request.status]


def list_filter_key(status_name: str, context_id: str, since: datetime | None) -> str:
    """What a ListTasks page token is bound to: it only works with its own filter (SPEC §8.5)."""
    return json.dumps(
        ["a2a.ListTasks", status_name, context_id.lower(), since.isoformat() if since else ""],
        separators=(",", ":"),
    )


def _context(context_id: str) -> uuid.UUID | None:
    """The task a context names; None when it names none (the page is then empty)."""
    try:
        key = uuid.UUID(context_id)
    except ValueError:
        return None
    return key if str(key) == context_id.lower() else None


@dataclass(frozen=True)
class PageQuery:
    """A checked ListTasks."""

    status: str | None
    context: uuid.UUID | None
    since: datetime | None
    page_size: int
    filter_key: str
    after: tuple[datetime, uuid.UUID] | None
    include_artifacts: bool
    names_no_task: bool  # a context that is no task's id: an empty, final page


def page_query(request: ListTasksRequest, sent_status: Any) -> PageQuery:
    _common_checks(request)
    status = status_filter(request, sent_status)
    requested = request.page_size if request.HasField("page_size") else DEFAULT_LIST_TASKS_PAGE_SIZE
    if not 1 <= requested <= MAX_REQUESTED_PAGE_SIZE:
        raise InvalidParamsError(
            message=f"pageSize must be between 1 and {MAX_REQUESTED_PAGE_SIZE}"
        )
    since = (
        request.status_timestamp_after.ToDatetime(tzinfo=UTC)
        if request.HasField("status_timestamp_after")
        else None
    )
    context = _context(request.context_id) if request.context_id else None
    filter_key = list_filter_key(TaskState.Name(request.status), request.context_id, since)
    names_no_task = bool(request.context_id) and context is None
    after = None
    if request.page_token and not names_no_task:
        try:
            after = keyset_position(request.page_token, filter_key)
        except Refusal as refusal:
            raise InvalidParamsError(message=refusal.message) from None
    return PageQuery(
        status=status,
        context=context,
        since=since,
        # A2A lets a server return fewer than asked; the response says how many a page holds.
        page_size=min(requested, PAGE_CAP),
        filter_key=filter_key,
        after=after,
        include_artifacts=request.include_artifacts,
        names_no_task=names_no_task,
    )


def _open_until_sql() -> str:
    """A task's deadline while it is open, else NULL: until when what a read shows of it holds
    (`core.caching.Shown`). Its params: `working`, as `DUE.params` gives it."""
    status, deadline = (statements.column(TaskForm, name) for name in ("status", "deadline"))
    return f"CASE WHEN {status} = %(working)s THEN {deadline} END"


@cache
def _task_sql(vendor: str, form: str) -> str:
    return (
        f"SELECT {DUE.sql(TaskForm)}, {PAST_DEADLINE.sql(TaskForm)}, "
        f"{statements.column(TaskForm, form)}, {statements.column(TaskForm, 'status')}, "
        f"{_open_until_sql()} "
        f"FROM {statements.table(TaskForm)} WHERE {statements.column(TaskForm, 'task')} = %(pk)s"
    )


def _task_params(key: uuid.UUID, source: DjangoSource) -> dict[str, Any]:
    now = source.prepare("deadline", timezone.now())
    return {"pk": source.prepare("task", key), **DUE.params(now)}


@cache
def _page_sql(
    vendor: str, by_status: bool, by_context: bool, since: bool, after: bool, full: bool
) -> str:
    """Whether any task is due or open past its deadline, the total and the page (one row more, to
    know whether another follows): one statement, one snapshot."""
    status, stamp, pk = (
        statements.column(TaskForm, name) for name in ("status", "status_timestamp", "task")
    )
    table = statements.table(TaskForm)
    # One status, compared as a constant: with `= ANY(...)` PostgreSQL leaves the status index
    # and filters the feed index instead.
    where = [f"{status} = %(status0)s"] if by_status else []  # `total_params`' name
    if by_context:
        where.append(f"{pk} = %(context)s")
    if since:
        where.append(f"{stamp} >= %(since)s")
    # The kept counts give an unfiltered total in one row read; a context or a time filter
    # matches one task or a bounded range of the index, which is counted.
    total = (
        f"(SELECT COUNT(*) FROM {table} WHERE {' AND '.join(where)})"
        if by_context or since
        else total_sql(1 if by_status else None)
    )
    if after:
        # A row comparison, not its spelled-out OR: PostgreSQL seeks the feed index to it.
        where.append(f"({stamp}, {pk}) < (%(at)s, %(pk)s)")
    page_filter = f"WHERE {' AND '.join(where)} " if where else ""
    listed = statements.column(TaskForm, "list_item_full_json" if full else "list_item_json")
    return (
        f"SELECT {DUE.any_sql()}, {PAST_DEADLINE.any_sql()}, {total}, page.{pk}, page.{stamp}, page.open_until, page.{listed} "
        f"FROM (SELECT 1 AS one) AS head LEFT JOIN ("
        f"SELECT {pk}, {stamp}, {_open_until_sql()} AS open_until, {listed} "
        f"FROM {table} {page_filter}"
        f"ORDER BY {stamp} DESC, {pk} DESC LIMIT %(limit)s) AS page ON 1 = 1 "
        f"ORDER BY page.{stamp} DESC, page.{pk} DESC"
    )


def _page_statement(query: PageQuery, source: DjangoSource) -> tuple[str, dict[str, Any]]:
    sql = _page_sql(
        statements.vendor(),
        query.status is not None,
        query.context is not None,
        query.since is not None,
        query.after is not None,
        query.include_artifacts,
    )
    params: dict[str, Any] = {
        **DUE.params(source.prepare("deadline", timezone.now())),
        **total_params(None if query.status is None else [query.status]),
        "limit": query.page_size + 1,
    }
    if query.context is not None:
        params["context"] = source.prepare("task", query.context)
    if query.since is not None:
        params["since"] = source.prepare("status_timestamp", query.since)
    if query.after is not None:
        params["at"] = source.prepare("status_timestamp", query.after[0])
        params["pk"] = source.prepare("task", query.after[1])
    return sql, params


async def _rows_settled(
    source: DjangoSource, statement: Callable[[], tuple[str, dict[str, Any]]], key: uuid.UUID | None
) -> list[Row]:
    """The rows of `statement`, on a replica that serves; what a replica fails, lacks, or shows
    open past its deadline, on the primary. What is due is evaluated (`key`, or all due for None) and
    read again: a task awaiting its keypers is not due, so no read waits on its row."""

    async def read(on_primary: bool) -> list[Row]:
        sql, params = statement()
        replica = None if on_primary else replicas.replica()
        if replica is not None:
            try:
                return await source.rows(replica, sql, params)
            except (DatabaseError, psycopg.Error) as exc:
                replicas.failed(replica, exc)
        return await source.rows(DEFAULT_DB_ALIAS, sql, params)

    rows = await read(False)
    on_primary = False
    if replicas.configured() and (not rows or rows[0][PAST_DEADLINE_AT]):
        on_primary = True
        rows = await read(on_primary)
    if rows and rows[0][DUE_AT]:
        await source.evaluated(key)
        rows = await read(on_primary)
    return rows


@dataclass(frozen=True)
class StoredTask:
    text: str  # the GetTask result's JSON
    open_until: datetime | None  # its deadline while it is open; None once evaluated


async def stored_task(
    request: GetTaskRequest, source: DjangoSource, version: str = "1.0"
) -> StoredTask:
    """The GetTask result in A2A `version`'s form; an evaluated task's is kept (`kept_forms`)."""
    _common_checks(request)
    try:
        key = uuid.UUID(request.id)
    except ValueError:
        raise TaskNotFoundError(message="no task has this id") from None
    kept_forms = EVALUATED_FORMS[version]
    if (kept := kept_forms.get(key)) is not None:
        return StoredTask(kept, None)
    sql = _task_sql(statements.vendor(), TASK_FORMS[version])
    rows = await _rows_settled(source, lambda: (sql, _task_params(key, source)), key)
    if not rows:
        raise TaskNotFoundError(message="no task has this id")
    _, _, text, status, open_until = rows[0]
    if status != TaskStatus.WORKING:
        kept_forms.keep(key, text)
        return StoredTask(str(text), None)
    (deadline,) = source.read_back(("deadline",), (open_until,))
    return StoredTask(str(text), deadline)


@dataclass(frozen=True)
class StoredPage:
    tasks: list[str]  # the stored list forms, in page order
    next_cursor: str  # "" on the last page
    page_size: int
    total: int
    include_artifacts: bool
    open_until: list[datetime | None]  # each task's, in page order (`StoredTask.open_until`)

    def response(self, tasks: Sequence[Task] = ()) -> ListTasksResponse:
        return ListTasksResponse(
            tasks=tasks,
            next_page_token=self.next_cursor,
            page_size=self.page_size,
            total_size=self.total,
        )


async def read_page(
    request: ListTasksRequest, sent_status: Any, source: DjangoSource
) -> StoredPage:
    """A ListTasks page of stored list forms; `sent_status`: see `status_filter`."""
    query = page_query(request, sent_status)
    if query.names_no_task:
        return StoredPage([], "", query.page_size, 0, query.include_artifacts, [])
    rows = await _rows_settled(source, lambda: _page_statement(query, source), None)
    total = int(rows[0][2])
    width = len(PAGE_COLUMNS)
    listed = [
        (*source.read_back(PAGE_COLUMNS, row[3 : 3 + width]), row[3 + width])
        for row in rows
        if row[3] is not None
    ]
    page = listed[: query.page_size]
    next_cursor = ""
    if len(listed) > query.page_size:
        pk, at, _, _ = page[-1]
        next_cursor = keyset_cursor(query.filter_key, at, pk)
    return StoredPage(
        [text for _, _, _, text in page],
        next_cursor,
        query.page_size,
        total,
        query.include_artifacts,
        [open_until for _, _, open_until, _ in page],
    )


async def stored_read(
    request: GetTaskRequest | ListTasksRequest, sent_status: Any, source: DjangoSource
) -> StoredTask | StoredPage:
    if isinstance(request, GetTaskRequest):
        return await stored_task(request, source)
    return await read_page(request, sent_status, source)


class DjangoSource:
    """Where the read runs (here Django's connection, one hop each) and how `TaskForm`'s values
    cross; `in_request_cycle`: inside Django's request signals, for a caller outside them."""

    def __init__(self, *, in_request_cycle: bool = False) -> None:
        self.in_request_cycle = in_request_cycle

    def prepare(self, name: str, value: Any) -> Any:
        return statements.db_value(TaskForm, name, value)

    def read_back(self, names: tuple[str, ...], row: Row) -> Row:
        return tuple(statements.python_values(TaskForm, names, row))

    def _run(self, work: Callable[..., Result], *args: Any) -> Awaitable[Result]:
        return DjangoCycle(inside_already=not self.in_request_cycle).call(work, *args, last=True)

    async def rows(self, alias: str, sql: str, params: dict[str, Any]) -> list[Row]:
        return await self._run(_fetch_all_on, alias, sql, params)

    async def evaluated(self, key: uuid.UUID | None) -> None:
        await self._run(tasks_evaluate_due if key is None else partial(task_evaluate, task_id=key))


def _fetch_all_on(alias: str, sql: str, params: dict[str, Any]) -> list[Row]:
    with replicas.reading_from(alias):
        return statements.fetch_all(sql, params)


DJANGO_SOURCE = DjangoSource()
