"""GetTask and a ListTasks page read on the event loop from a small async psycopg pool, sparing
Django's three hops to its ORM thread and its connection checks, most of a read's cost. Safe as
SPEC §16 asks: a pool belongs to its process and event loop, so no server session is shared; a
read the pool fails goes to the SDK's dispatcher (Django's checked connections) and the pool rests
for `FAIL_FAST_S`, so an outage fails requests fast. A replica's failed read goes to the primary.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import weakref
from typing import Any

import psycopg
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from psycopg import AsyncConnection
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool

from a2a_gateway.stored_reads import DjangoSource, Row
from core import statements

logger = logging.getLogger(__name__)

POOL_MAX_SIZE = 4  # one process, one core: reads take a fraction of a millisecond each
# A read waits at most this long for a connection before Django answers it instead.
POOL_TIMEOUT_S = 0.5
FAIL_FAST_S = 1.0


Pool = AsyncConnectionPool[AsyncConnection[Any]]
# One pool per event loop (a test may run a second beside its server's), and in it per process (a
# forked child opens its own) and database alias.
_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[int, str], Pool]] = (
    weakref.WeakKeyDictionary()
)
_unavailable_until = 0.0


def is_available() -> bool:
    return statements.vendor() == "postgresql" and time.monotonic() >= _unavailable_until


# What Django's connection parameters hold besides libpq's: psycopg's own arguments.
_NOT_LIBPQ = ("cursor_factory", "context", "prepare_threshold")


def _conninfo(alias: str) -> str:
    """Django's connection parameters of `alias` (with the URL's libpq ones, SPEC §16), and ours."""
    parameters = {
        name: value
        for name, value in connections[alias].get_connection_params().items()
        if name not in _NOT_LIBPQ
    }
    parameters.setdefault("application_name", "cairn-reads")
    if settings.CAIRN_DB_POOLER != "transaction":
        # The statements plan alike whatever their values, but a page's generic plan looks dear
        # (its LIMIT is a parameter): PostgreSQL would replan every page, and JIT-compile a large
        # table's first page at more cost than the read. The URL's own options come after and win.
        # A transaction pooler keeps no session setting (PgBouncer refuses `options`); the reads
        # convert times themselves.
        ours = "-c TimeZone=UTC -c plan_cache_mode=force_generic_plan -c jit=off"
        parameters["options"] = " ".join(filter(None, [ours, parameters.get("options")]))
    return make_conninfo(**parameters)


async def _current_pool(alias: str) -> Pool:
    loop_pools = _pools.setdefault(asyncio.get_running_loop(), {})
    key = (os.getpid(), alias)
    pool = loop_pools.get(key)
    if pool is None:
        pool = loop_pools[key] = AsyncConnectionPool(
            _conninfo(alias),
            min_size=1,
            max_size=POOL_MAX_SIZE,
            timeout=POOL_TIMEOUT_S,
            reconnect_timeout=4,
            # psycopg prepares a statement run five times on a connection, by name: a
            # transaction pooler would run it on another server connection that has no such name.
            kwargs={
                "autocommit": True,
                "prepare_threshold": None if settings.CAIRN_DB_POOLER == "transaction" else 5,
            },
            open=False,
            name="cairn-reads",
        )
        await pool.open(wait=False)
    return pool


async def close() -> None:
    """Close the running loop's pools (at the server's shutdown)."""
    for (pid, _), pool in _pools.pop(asyncio.get_running_loop(), {}).items():
        if pid == os.getpid():
            await pool.close()


class Unavailable(Exception):
    """The pool could not read: the binding leaves the request to the dispatcher."""


class PoolSource(DjangoSource):
    """The reads on this module's pools; the evaluation, which writes, stays Django's."""

    def prepare(self, name: str, value: Any) -> Any:
        return value  # psycopg adapts a UUID and an aware datetime itself

    def read_back(self, names: tuple[str, ...], row: Row) -> Row:
        return row  # psycopg reads a UUID and a timestamptz as Python's own

    async def rows(self, alias: str, sql: str, params: dict[str, Any]) -> list[Row]:
        global _unavailable_until
        try:
            pool = await _current_pool(alias)
            async with pool.connection() as conn:
                return await (await conn.execute(sql, params)).fetchall()
        except psycopg.Error as exc:
            if alias != DEFAULT_DB_ALIAS:
                raise  # a replica's: the primary answers instead
            logger.info("stored read failed, answered through Django: %s", type(exc).__name__)
            _unavailable_until = time.monotonic() + FAIL_FAST_S
            raise Unavailable from exc


POOL_SOURCE = PoolSource(in_request_cycle=True)
