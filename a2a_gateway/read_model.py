"""The A2A door's read model: each task's public A2A form, stored in the door's own table
(`TaskForm`), and the statements every read path runs on it.

Written: the domain calls the one hook `tasks.changes.task_changed` in every transaction that
changes a task, and the settings point it here (`task_forms_written`), so the form commits with
its change. Each task has one binding-neutral form, the proto JSON of its A2A Task (what
`MessageToDict` writes), and one of the task as a ListTasks page lists it; a binding only wraps
them (JSON-RPC in its envelope, `a2a_gateway.fast_reads`).

Read: GetTask and a ListTasks page are one statement each, built here once for every path: on
Django's connection (`DJANGO_READS`, any database) or on the ASGI app's own pool on the event
loop (`a2a_gateway.read_pool`). Whether anything is due and a list's total come from the domain's
own statements (`tasks.evaluation.due_sql`, `tasks.counts.total_sql`), the keyset cursor from
`core.cursors`; a page or a task this cannot answer (something due, a form not current) is
answered by the SDK's dispatcher and Cairn's handler, which evaluate first.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, Protocol

from a2a.server.routes.common import serialize_list_tasks_response
from a2a.types import ListTasksResponse, TaskState
from asgiref.sync import sync_to_async
from django.core import signals
from django.db import connection
from django.utils import timezone
from google.protobuf.json_format import MessageToDict

from a2a_gateway.models import TaskForm
from a2a_gateway.translate import status_instant, task_message, task_public, task_state
from core import statements
from core.cursors import keyset_cursor
from tasks.changes import TaskChange
from tasks.counts import total_params, total_sql
from tasks.evaluation import due_params, due_sql, tasks_evaluate_due
from tasks.models import TaskStatus
from tasks.rendered import json_text

# Bump when the forms' content changes: rows below it are answered by the handler until written
# again (`tasks.rendered.tasks_render`).
FORM_VERSION = 1

# Enough of a view for `task_message` to build a Task of a shape.
_PROBE = {"id": "probe", "state": "open", "created_at": "2000-01-01T00:00:00.000Z"}


@cache
def _shapes(state: TaskState, with_artifact: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """The forms of a Task in this state, with or without its artifact, around a stand-in id and
    empty Structs, as the SDK's serialisers write them: the GetTask result, and the task inside a
    ListTasks page (which prints the fields a page always prints). All else in them is the same
    for every task in that state, so the serialisers run once a shape, not once a task: they
    took a fifth of the sweep (bench/README.md, F31)."""
    task = task_message(_PROBE, cairn={}, evaluation={} if with_artifact else None)
    task.status.state = state
    task_json = MessageToDict(task, preserving_proto_field_name=False)
    del task.artifacts[:]
    listed = serialize_list_tasks_response(ListTasksResponse(tasks=[task]), False)["tasks"][0]
    return task_json, listed


def _timestamp_json(instant: str) -> str:
    """An instant as protobuf's JSON writes a Timestamp: Cairn's instants hold whole milliseconds
    (`core.clock`), written as three digits, or none when they are zero (F41)."""
    return instant[:-5] + "Z" if instant.endswith(".000Z") else instant


def _in_shape(
    shape: dict[str, Any], task_id: str, timestamp: str, cairn: Any, evaluation: Any
) -> dict[str, Any]:
    """A shape's form of one task: the shape's own keys, with this task's values."""
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


def task_forms(view: dict[str, Any]) -> tuple[str, str]:
    """The task's GetTask result and its ListTasks entry (without artifacts: a page with
    `includeArtifacts` is the handler's), as JSON text."""
    public = task_public(view)
    evaluation = view.get("evaluation")
    task_shape, listed_shape = _shapes(task_state(view), evaluation is not None)
    instant = _timestamp_json(status_instant(view))
    # `data_part` leaves an empty object's Value unset, which the shape already writes as null.
    task_json = _in_shape(task_shape, view["id"], instant, public, evaluation or None)
    listed = _in_shape(listed_shape, view["id"], instant, public, None)
    return json_text(task_json), json_text(listed)


def task_form(change: TaskChange) -> TaskForm:
    """The changed task's row of the read model."""
    task_json, list_item_json = task_forms(change.view)
    return TaskForm(
        task_id=change.task.pk,
        status=change.task.status,
        status_timestamp=change.task.status_timestamp,
        deadline=change.task.deadline,
        task_json=task_json,
        list_item_json=list_item_json,
        version=FORM_VERSION,
    )


def task_forms_written(changes: Sequence[TaskChange]) -> tuple[statements.Write, ...]:
    """`tasks.changes.task_changed` for the A2A door (`CAIRN_TASK_CHANGED`): each changed task's
    forms, written whole over the last ones."""
    return statements.upserted([task_form(change) for change in changes])


# ---------------------------------------------------------------------------------------------
# Reading


@dataclass(frozen=True)
class PageQuery:
    """A ListTasks page the stored forms can answer: one status or none, its size, its filter
    (what its cursor is bound to) and the keyset position its cursor holds."""

    status: str | None
    page_size: int
    filter_key: str
    after: tuple[datetime, uuid.UUID] | None


@dataclass(frozen=True)
class StoredTask:
    text: str  # the GetTask result
    evaluated: bool  # the text never changes again


@dataclass(frozen=True)
class StoredPage:
    tasks: list[str]  # the stored list entries, in page order
    next_cursor: str  # "" on the last page
    total: int


class StoredReads(Protocol):
    """Where a binding finds the stored forms (Django's connection, or the read pool's); None
    means the handler answers."""

    async def task(self, key: uuid.UUID, now: datetime) -> StoredTask | None: ...

    async def page(self, query: PageQuery, now: datetime) -> StoredPage | None: ...


# A value as a statement's parameter for its column: Django's conversion for its connection, or
# the value itself for psycopg's own connections (PostgreSQL only, where they are the same).
Prepare = Callable[[str, Any], Any]


def _django_value(name: str, value: Any) -> Any:
    return statements.db_value(TaskForm, name, value)


def _native_value(name: str, value: Any) -> Any:
    return value


@cache
def _task_sql(vendor: str) -> str:
    column = {name: statements.column(TaskForm, name) for name in ("task", "status", "deadline")}
    return (
        f"SELECT {statements.columns(TaskForm, ('task_json', 'status'))} "
        f"FROM {statements.table(TaskForm)} "
        f"WHERE {column['task']} = %(pk)s AND {statements.column(TaskForm, 'version')} = "
        f"%(version)s AND ({column['status']} <> %(working)s OR {column['deadline']} > %(now)s)"
    )


def task_statement(key: uuid.UUID, now: datetime, prepare: Prepare) -> tuple[str, dict[str, Any]]:
    """GetTask's statement: the task's form and status, unless it is open past its deadline
    (the handler evaluates it first, SPEC §4.3) or its form is not current."""
    return _task_sql(connection.vendor), {
        "pk": prepare("task", key),
        "version": FORM_VERSION,
        "working": TaskStatus.WORKING.value,
        "now": prepare("deadline", now),
    }


def stored_task_of(row: Sequence[Any] | None) -> StoredTask | None:
    return None if row is None else StoredTask(row[0], evaluated=row[1] != TaskStatus.WORKING)


@cache
def _page_sql(vendor: str, by_status: bool, after: bool) -> str:
    """Whether anything is due, the filter's total and the page by keyset (one row more than the
    page, to know whether another follows): one statement, one snapshot."""
    status, stamp, pk = (
        statements.column(TaskForm, name) for name in ("status", "status_timestamp", "task")
    )
    # One status, compared as a constant: with `= ANY(...)` PostgreSQL leaves the status index
    # and filters the feed index instead, 50,000 rows deep at 100,000 tasks.
    where = [f"{status} = %(status0)s"] if by_status else []  # `total_params`' name
    if after:
        # A row comparison, not its spelled-out OR: PostgreSQL seeks the feed index to it.
        where.append(f"({stamp}, {pk}) < (%(at)s, %(pk)s)")
    page_filter = f"WHERE {' AND '.join(where)} " if where else ""
    listed = statements.columns(TaskForm, ("task", "status_timestamp", "version", "list_item_json"))
    return (
        f"SELECT {due_sql()}, {total_sql(1 if by_status else None)}, "
        f"page.{pk}, page.{stamp}, page.{statements.column(TaskForm, 'version')}, "
        f"page.{statements.column(TaskForm, 'list_item_json')} "
        f"FROM (SELECT 1 AS one) AS head LEFT JOIN ("
        f"SELECT {listed} FROM {statements.table(TaskForm)} {page_filter}"
        f"ORDER BY {stamp} DESC, {pk} DESC LIMIT %(limit)s) AS page ON 1 = 1 "
        f"ORDER BY page.{stamp} DESC, page.{pk} DESC"
    )


def page_statement(query: PageQuery, now: datetime, prepare: Prepare) -> tuple[str, dict[str, Any]]:
    params: dict[str, Any] = {
        **due_params(prepare("deadline", now)),
        **total_params(None if query.status is None else [query.status]),
        "limit": query.page_size + 1,
    }
    if query.after is not None:
        params["at"] = prepare("status_timestamp", query.after[0])
        params["pk"] = prepare("task", query.after[1])
    sql = _page_sql(connection.vendor, query.status is not None, query.after is not None)
    return sql, params


Row = tuple[Any, ...]


def stored_page_of(
    query: PageQuery, rows: Sequence[Row], read_back: Callable[[Row], Row]
) -> StoredPage | None:
    """The page from its statement's rows, or None when something is due or a form on it is not
    current. `read_back` turns a listed row's key and instant into Python's (`statements.python_values`
    on Django's connection)."""
    if not rows or rows[0][0]:
        return None
    total = int(rows[0][1])
    listed = [read_back(row[2:]) for row in rows if row[2] is not None]
    if any(version != FORM_VERSION for _, _, version, _ in listed):
        return None
    page = listed[: query.page_size]
    next_cursor = ""
    if len(listed) > query.page_size:
        pk, at, _, _ = page[-1]
        next_cursor = keyset_cursor(query.filter_key, at, pk)
    return StoredPage([text for _, _, _, text in page], next_cursor, total)


def _as_read(row: Row) -> Row:
    key, at = statements.python_values(TaskForm, ("task", "status_timestamp"), row[:2])
    return (key, at, *row[2:])


def django_task(key: uuid.UUID, now: datetime) -> StoredTask | None:
    return stored_task_of(statements.fetch_one(*task_statement(key, now, _django_value)))


def django_page(query: PageQuery, now: datetime) -> StoredPage | None:
    """On Django's thread a due task is evaluated here, as every list of the domain does
    (`tasks.selectors.task_page`), and the page read again."""
    rows = statements.fetch_all(*page_statement(query, now, _django_value))
    if rows and rows[0][0] and tasks_evaluate_due():
        rows = statements.fetch_all(*page_statement(query, timezone.now(), _django_value))
    return stored_page_of(query, rows, _as_read)


class DjangoReads:
    """The stored reads on Django's connection, one hop to its thread each. `in_request_cycle`:
    send Django's request signals around the read in the same hop, for a caller outside
    Django's request cycle (the ASGI app), so the connection is checked and given back."""

    def __init__(self, *, in_request_cycle: bool = False) -> None:
        self.in_request_cycle = in_request_cycle

    def _run(self, read: Callable[..., Any], *args: Any) -> Any:
        if not self.in_request_cycle:
            return read(*args)
        signals.request_started.send(sender=DjangoReads)
        try:
            return read(*args)
        finally:
            signals.request_finished.send(sender=DjangoReads)

    async def task(self, key: uuid.UUID, now: datetime) -> StoredTask | None:
        result: StoredTask | None = await sync_to_async(self._run)(django_task, key, now)
        return result

    async def page(self, query: PageQuery, now: datetime) -> StoredPage | None:
        result: StoredPage | None = await sync_to_async(self._run)(django_page, query, now)
        return result


DJANGO_READS = DjangoReads()
