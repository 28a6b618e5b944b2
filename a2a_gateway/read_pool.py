"""GetTask and a ListTasks page read on the event loop, from a small async psycopg pool.

Through Django a read costs three hops to the ORM's thread (the request signals and the query)
and a connection taken from Django's pool, checked and given back on every request; for a read
of one stored text column that is most of its cost (bench/README.md, issue 15). Here the two
stored reads are one statement each on a connection of the process's own pool, awaited on the
event loop. Only the ASGI app uses it, on PostgreSQL; everything else goes through Django.

Safety, as SPEC §16 asks of every connection:
- a pool belongs to the process and event loop that opened it: a forked child never uses its
  parent's pool (it opens its own), and psycopg ends a connection only from the process that
  opened it, so no server session is ever shared;
- a connection is not checked before use: a broken one fails its read, psycopg's pool drops it,
  and the request goes to the SDK's dispatcher, which reads through Django's checked connections
  and answers an outage with -32603 as every other request does;
- after a failure the pool is left alone for a second, so while the database is down a request
  spends no time here before Django fails it fast.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
import weakref
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any, cast

from django.conf import settings
from django.db import connection
from django.db.models import Field
from psycopg import AsyncConnection
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool

from a2a_gateway.fast_reads import (
    PageQuery,
    StoredPage,
    StoredTask,
    stored_task_of,
    stored_task_sql,
)
from core.cursors import cursor_encode
from tasks.models import Task, TaskCount, TaskStatus
from tasks.rendered import RENDER_VERSION

logger = logging.getLogger(__name__)

POOL_MAX_SIZE = 4  # one process, one core: reads take a fraction of a millisecond each
# A read waits at most this long for a connection before Django answers it instead.
POOL_TIMEOUT_S = 0.5
FAIL_FAST_S = 1.0


@cache
def _column(name: str) -> str:
    field = cast(Field, Task._meta.get_field(name))
    return connection.ops.quote_name(field.column or name)


@cache
def _page_sql(*, by_status: bool, after: bool) -> str:
    """Whether anything is due, the filter's count from TaskCount, and the page by keyset (one
    row more than the page, to know whether another follows): one statement, one snapshot.
    "Due" compares the earliest open deadline with now, as `tasks_evaluate_due` does, so the
    probe is always the end of the `task_due` index (bench/README.md, F27)."""
    table = connection.ops.quote_name(Task._meta.db_table)
    counts = connection.ops.quote_name(TaskCount._meta.db_table)
    status, stamp, pk = _column("status"), _column("status_timestamp"), _column("id")
    # One status, compared as a constant: with `= ANY(...)` PostgreSQL leaves the status index
    # and filters the feed index instead, 50,000 rows deep at 100,000 tasks.
    where = [f"{status} = %(status)s"] if by_status else []
    if after:
        # A row comparison, not its spelled-out OR: PostgreSQL seeks the feed index to it.
        where.append(f"({stamp}, {pk}) < (%(at)s, %(pk)s)")
    page_filter = f"WHERE {' AND '.join(where)} " if where else ""
    count_filter = "WHERE status = %(status)s " if by_status else ""
    return (
        f"SELECT COALESCE((SELECT MIN({_column('deadline')}) FROM {table} "
        f"WHERE {status} = %(working)s) <= %(now)s, false), "
        f"(SELECT COALESCE(SUM(count), 0) FROM {counts} {count_filter}), "
        f"page.{pk}, page.{stamp}, page.{_column('rendered_version')}, "
        f"page.{_column('a2a_list_json')} "
        f"FROM (SELECT 1) AS one LEFT JOIN LATERAL ("
        f"SELECT * FROM {table} {page_filter}"
        f"ORDER BY {stamp} DESC, {pk} DESC LIMIT %(limit)s) AS page ON true "
        f"ORDER BY page.{stamp} DESC, page.{pk} DESC"
    )


@dataclass
class _ProcessPool:
    pid: int
    pool: AsyncConnectionPool[AsyncConnection[Any]]


# One pool per event loop (uvicorn runs one; a test may run a second beside its server's).
_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _ProcessPool] = (
    weakref.WeakKeyDictionary()
)
_unavailable_until = 0.0


@cache
def _on_postgresql() -> bool:
    return connection.vendor == "postgresql"


def is_available() -> bool:
    """Whether the ASGI app may read here: PostgreSQL, and no failure in the last second."""
    return _on_postgresql() and time.monotonic() >= _unavailable_until


# What Django's connection parameters hold besides libpq's: psycopg's own arguments.
_NOT_LIBPQ = ("cursor_factory", "context", "prepare_threshold")


def _conninfo() -> str:
    """Django's connection parameters (the URL's libpq parameters among them: `sslmode`,
    `options`, ... SPEC §16), with the pool's own additions where the URL leaves room."""
    parameters = {
        name: value
        for name, value in connection.get_connection_params().items()
        if name not in _NOT_LIBPQ
    }
    # The pool names itself only when the URL names no application.
    parameters.setdefault("application_name", "cairn-reads")
    if not _behind_transaction_pooler():
        # The pool's two statements plan alike whatever their values (one index each), but a
        # generic plan of a page looks dear to PostgreSQL (its LIMIT is a parameter), so by
        # default it planned every page afresh: 40% of its time (bench/README.md, F28). The
        # URL's own options come after these, so they win where both set something. A
        # transaction pooler keeps no session setting (and PgBouncer refuses `options`); the
        # reads convert every time they read, whatever the session's time zone.
        ours = "-c TimeZone=UTC -c plan_cache_mode=force_generic_plan"
        parameters["options"] = " ".join(filter(None, [ours, parameters.get("options")]))
    return make_conninfo(**parameters)


def _behind_transaction_pooler() -> bool:
    return settings.CAIRN_DB_POOLER == "transaction"


async def _current_pool() -> AsyncConnectionPool[AsyncConnection[Any]]:
    loop = asyncio.get_running_loop()
    current = _pools.get(loop)
    if current is None or current.pid != os.getpid():
        pool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
            _conninfo(),
            min_size=1,
            max_size=POOL_MAX_SIZE,
            timeout=POOL_TIMEOUT_S,
            reconnect_timeout=4,
            # psycopg prepares a statement run five times on a connection, by name: a
            # transaction pooler would run it on another server connection that has no such name.
            kwargs={
                "autocommit": True,
                "prepare_threshold": None if _behind_transaction_pooler() else 5,
            },
            open=False,
            name="cairn-reads",
        )
        await pool.open(wait=False)
        current = _pools[loop] = _ProcessPool(os.getpid(), pool)
    return current.pool


async def close() -> None:
    """Close the running loop's pool (at the server's shutdown)."""
    current = _pools.pop(asyncio.get_running_loop(), None)
    if current is not None and current.pid == os.getpid():
        await current.pool.close()


async def _fetch(sql: str, params: Any) -> list[tuple[Any, ...]] | None:
    """The statement's rows, or None after any failure (the dispatcher answers instead)."""
    global _unavailable_until
    try:
        pool = await _current_pool()
        async with pool.connection() as conn:
            cursor = await conn.execute(sql, params)
            return await cursor.fetchall()
    except Exception as exc:  # noqa: BLE001 (any failure: Django's path answers, outage or not)
        logger.info("stored read failed, answered through Django: %s", type(exc).__name__)
        _unavailable_until = time.monotonic() + FAIL_FAST_S
        return None


async def stored_task(key: uuid.UUID, now: datetime) -> StoredTask | None:
    rows = await _fetch(stored_task_sql(), (key, RENDER_VERSION, TaskStatus.WORKING.value, now))
    return stored_task_of(*rows[0]) if rows else None


async def stored_page(query: PageQuery, now: datetime) -> StoredPage | None:
    """The page's stored list forms, next position and count; None when something is due or a
    task on the page is not rendered (the dispatcher evaluates and renders first)."""
    if query.statuses is not None and len(query.statuses) != 1:
        return None  # no A2A filter names two statuses; the ORM's path would serve one that did
    params: dict[str, Any] = {
        "working": TaskStatus.WORKING.value,
        "now": now,
        "status": next(iter(query.statuses)) if query.statuses is not None else None,
        "limit": query.page_size + 1,
    }
    if query.after is not None:
        params["at"], params["pk"] = query.after
    sql = _page_sql(by_status=query.statuses is not None, after=query.after is not None)
    rows = await _fetch(sql, params)
    if rows is None or rows[0][0]:
        return None
    total = int(rows[0][1])
    listed = [row for row in rows if row[2] is not None]
    if any(row[4] != RENDER_VERSION for row in listed):
        return None
    page = listed[: query.page_size]
    next_cursor = ""
    if len(listed) > query.page_size:
        at, pk = page[-1][3].astimezone(UTC), page[-1][2]
        next_cursor = cursor_encode(query.filter_key, [at.isoformat(), str(pk)])
    return StoredPage([row[5] for row in page], next_cursor, total)


class PoolReads:
    """`StoredReads` from this module's pool."""

    async def task(self, key: uuid.UUID, now: datetime) -> StoredTask | None:
        return await stored_task(key, now)

    async def page(self, query: PageQuery, now: datetime) -> StoredPage | None:
        return await stored_page(query, now)


POOL_READS = PoolReads()
