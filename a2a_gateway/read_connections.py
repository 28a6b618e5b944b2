"""GetTask and a ListTasks page read on the event loop, from a small async psycopg pool.

Through Django a read costs three hops to the ORM's thread and a connection checked and given back
on every request: most of the cost of reading one stored text column. Here the same statement
(`a2a_gateway.stored_reads`) runs on a connection of the process's own pool, awaited on the event
loop. Only the ASGI app and the gRPC server use it, on PostgreSQL.

Safety, as SPEC §16 asks of every connection:
- a pool belongs to the process and event loop that opened it: a forked child opens its own, so
  no server session is ever shared;
- a connection is not checked before use: a broken one fails its read, psycopg's pool drops it,
  and the request goes to the SDK's dispatcher, whose handler reads through Django's checked
  connections and answers an outage as every other request does;
- after a failure the pool is left alone for a second, so while the database is down a request
  spends no time here before Django fails it fast.

Each replica (`core.replicas`) has a pool of its own; a read it fails goes to the primary.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
import weakref
from dataclasses import dataclass
from functools import cache
from typing import Any

import psycopg
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections
from psycopg import AsyncConnection
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool

from a2a_gateway.stored_reads import DjangoSource, Row
from core import replicas

logger = logging.getLogger(__name__)

POOL_MAX_SIZE = 4  # one process, one core: reads take a fraction of a millisecond each
# A read waits at most this long for a connection before Django answers it instead.
POOL_TIMEOUT_S = 0.5
FAIL_FAST_S = 1.0


@dataclass
class _ProcessPool:
    pid: int
    pool: AsyncConnectionPool[AsyncConnection[Any]]


# One pool per event loop (uvicorn runs one; a test may run a second beside its server's) and
# database (the primary's alias, and each replica's).
_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _ProcessPool]] = (
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


def _conninfo(alias: str) -> str:
    """Django's connection parameters of database `alias` (the URL's libpq parameters among
    them: `sslmode`, `options`, ... SPEC §16), with the pool's own additions where the URL leaves
    room."""
    parameters = {
        name: value
        for name, value in connections[alias].get_connection_params().items()
        if name not in _NOT_LIBPQ
    }
    # The pool names itself only when the URL names no application.
    parameters.setdefault("application_name", "cairn-reads")
    if not _behind_transaction_pooler():
        # The statements plan alike whatever their values, but a page's generic plan looks dear
        # (its LIMIT is a parameter), so PostgreSQL would replan every page, and that unknown
        # LIMIT puts a large table's first page past the JIT threshold, whose compiling costs
        # more than the read. The URL's own options come after these and win. A transaction
        # pooler keeps no session setting (PgBouncer refuses `options`); the reads convert
        # times themselves, whatever the session's time zone.
        ours = "-c TimeZone=UTC -c plan_cache_mode=force_generic_plan -c jit=off"
        parameters["options"] = " ".join(filter(None, [ours, parameters.get("options")]))
    return make_conninfo(**parameters)


def _behind_transaction_pooler() -> bool:
    return settings.CAIRN_DB_POOLER == "transaction"


async def _current_pool(alias: str) -> AsyncConnectionPool[AsyncConnection[Any]]:
    loop = asyncio.get_running_loop()
    loop_pools = _pools.setdefault(loop, {})
    current = loop_pools.get(alias)
    if current is None or current.pid != os.getpid():
        pool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
            _conninfo(alias),
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
        current = loop_pools[alias] = _ProcessPool(os.getpid(), pool)
    return current.pool


async def close() -> None:
    """Close the running loop's pools (at the server's shutdown)."""
    for current in _pools.pop(asyncio.get_running_loop(), {}).values():
        if current.pid == os.getpid():
            await current.pool.close()


class Unavailable(Exception):
    """The pool could not read: the binding leaves the request to the dispatcher, whose handler
    reads through Django's checked connections and answers an outage as SPEC §16 says."""


class PoolSource:
    """`reads.Source` on this module's pools; the evaluation, which writes, on Django's thread.
    `on_replicas`: read on a replica that serves, when there is one."""

    _django = DjangoSource(in_request_cycle=True)

    def __init__(self, *, on_replicas: bool = True) -> None:
        self.on_replicas = on_replicas and bool(replicas.configured())
        self._primary = PoolSource(on_replicas=False) if self.on_replicas else self

    def primary(self) -> PoolSource:
        return self._primary

    def prepare(self, name: str, value: Any) -> Any:
        return value  # psycopg adapts a UUID and an aware datetime itself

    def read_back(self, names: tuple[str, ...], row: Row) -> Row:
        return row  # psycopg reads a UUID and a timestamptz as Python's own

    async def rows(self, sql: str, params: dict[str, Any]) -> list[Row]:
        global _unavailable_until
        replica = replicas.replica() if self.on_replicas else None
        if replica is not None:
            try:
                return await _rows_on(replica, sql, params)
            except psycopg.Error as exc:  # the primary answers instead
                replicas.failed(replica, exc)
        try:
            return await _rows_on(DEFAULT_DB_ALIAS, sql, params)
        except psycopg.Error as exc:
            logger.info("stored read failed, answered through Django: %s", type(exc).__name__)
            _unavailable_until = time.monotonic() + FAIL_FAST_S
            raise Unavailable from exc

    async def evaluated(self, key: uuid.UUID | None) -> None:
        await self._django.evaluated(key)


async def _rows_on(alias: str, sql: str, params: dict[str, Any]) -> list[Row]:
    pool = await _current_pool(alias)
    async with pool.connection() as conn:
        cursor = await conn.execute(sql, params)
        return await cursor.fetchall()


POOL_SOURCE = PoolSource()
