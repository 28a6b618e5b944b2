"""Where a read goes (SPEC §16.1): the primary, or a streaming replica of `DATABASE_REPLICA_URLS`.
Only a `public_read` reads a replica, and one whose answer may be stale is done again on the
primary. Each process checks its replicas from a thread of its own, never in a read's way."""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from psycopg.conninfo import make_conninfo

from core.outages import OUTAGES, first_line

logger = logging.getLogger(__name__)

T = TypeVar("T")

CHECK_EVERY_S = 1.0
# A failed read asks for a check at once, but checks stay this far apart at least.
CHECK_AGAIN_AFTER_S = 0.1
CHECK_CONNECT_TIMEOUT_S = 2
# Whether it is a replica, whether it has replayed all it received, and the age of the last commit
# it replayed. An idle primary commits nothing, so that age grows on a replica fully caught up:
# one that has replayed every byte it received is not behind, however old that commit.
CHECK_SQL = (
    "SELECT pg_is_in_recovery(), "
    "COALESCE(pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn(), false), "
    "EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp())::float8"
)

SERVING = "serving"
LAGGING = "lagging"
DOWN = "down"
NOT_A_REPLICA = "not_a_replica"
UNCHECKED = "unchecked"

# The database the current context reads: the primary unless a public read chose a replica.
_reading: ContextVar[str] = ContextVar("cairn_reading", default=DEFAULT_DB_ALIAS)


# The replicas' aliases in `DATABASES`, in the order of `DATABASE_REPLICA_URLS`.
_ALIASES = tuple(alias for alias in settings.DATABASES if alias != DEFAULT_DB_ALIAS)


def configured() -> tuple[str, ...]:
    return _ALIASES


@dataclass
class State:
    alias: str
    state: str = UNCHECKED
    lag_s: float | None = None
    detail: str = ""

    @property
    def serving(self) -> bool:
        return self.state == SERVING


def where(alias: str) -> str:
    """A replica as `/readyz` names it: hosts, ports and database, never a password."""
    params = connections[alias].settings_dict
    hosts = str(params["HOST"] or "localhost").split(",")
    ports = str(params["PORT"] or "").split(",")
    ports = ports * len(hosts) if len(ports) == 1 else ports
    listed = ",".join(f"{host}:{port or 5432}" for host, port in zip(hosts, ports, strict=False))
    return f"{listed}/{params['NAME']}"


class _Watch:
    """The replicas' states in this process, and the thread that checks them."""

    def __init__(self) -> None:
        self.states = {alias: State(alias) for alias in _ALIASES}
        self.serving: tuple[str, ...] = ()
        self.turns = itertools.count()
        self.wake = threading.Event()
        self.checked_once = threading.Event()
        self._connections: dict[str, psycopg.Connection[Any]] = {}
        threading.Thread(target=self._run, name="cairn-replica-watch", daemon=True).start()

    def _run(self) -> None:
        while True:
            for alias in _ALIASES:
                before, state = self.states[alias].state, self._checked(alias)
                self.states[alias] = state
                if state.state != before:
                    detail = f": {state.detail}" if state.detail else ""
                    logger.info("replica %s is %s%s", alias, state.state, detail)
            self.serving = tuple(alias for alias, state in self.states.items() if state.serving)
            self.checked_once.set()
            if self.wake.wait(CHECK_EVERY_S):
                self.wake.clear()
                time.sleep(CHECK_AGAIN_AFTER_S)

    def _connection(self, alias: str) -> psycopg.Connection[Any]:
        conn = self._connections.get(alias)
        if conn is None or conn.closed:
            parameters = {
                name: value
                for name, value in connections[alias].get_connection_params().items()
                if name not in ("cursor_factory", "context", "prepare_threshold")
            }
            parameters.setdefault("application_name", "cairn-replica-check")
            parameters["connect_timeout"] = CHECK_CONNECT_TIMEOUT_S
            # Never prepared: a transaction pooler may run the next check on another server.
            conn = psycopg.connect(
                make_conninfo(**parameters), autocommit=True, prepare_threshold=None
            )
            self._connections[alias] = conn
        return conn

    def _checked(self, alias: str) -> State:
        try:
            in_recovery, caught_up, lag_s = self._connection(alias).execute(
                CHECK_SQL
            ).fetchone() or (False, False, None)
        except Exception as exc:  # whatever fails, the replica is skipped and the watch goes on
            conn = self._connections.pop(alias, None)
            if conn is not None:
                conn.close()
            return State(alias, DOWN, None, f"does not answer: {first_line(exc)}")
        if not in_recovery:
            return State(alias, NOT_A_REPLICA, None, "is not in recovery: not a replica")
        lag = 0.0 if caught_up else lag_s
        limit = settings.CAIRN_REPLICA_MAX_LAG_S
        if lag is None or lag > limit:
            behind = "an unknown time" if lag is None else f"{lag:.1f} s"
            return State(alias, LAGGING, lag, f"is {behind} behind (at most {limit} s)")
        return State(alias, SERVING, lag)


_watch: _Watch | None = None
_starting = threading.Lock()


def _watching() -> _Watch:
    """This process's watch, started by the first read that needs it."""
    global _watch
    if _watch is None:
        with _starting:
            if _watch is None:
                _watch = _Watch()
    return _watch


def _forgotten_in_child() -> None:
    """A forked child has no checking thread and shares no connection: it starts its own."""
    global _watch, _starting
    _watch, _starting = None, threading.Lock()


os.register_at_fork(after_in_child=_forgotten_in_child)


def replica() -> str | None:
    """A replica that serves, taken in turn; None when none does (or none is configured)."""
    if not _ALIASES:
        return None
    watch = _watching()
    serving = watch.serving
    return serving[next(watch.turns) % len(serving)] if serving else None


def failed(alias: str, exc: BaseException) -> None:
    """A read on replica `alias` failed: an outage has the replica checked at once, so one that is
    down is skipped from then on; any other error (a recovery conflict, say) is the read's alone."""
    logger.info("a read on replica %s failed, asked the primary: %s", alias, first_line(exc))
    if isinstance(exc, OUTAGES):
        _watching().wake.set()


def states() -> list[State]:
    """Each replica's state as this process routes by it, once checked (a readiness probe may be
    the process's first request)."""
    watch = _watching()
    watch.checked_once.wait(CHECK_CONNECT_TIMEOUT_S + 1)
    return [watch.states[alias] for alias in _ALIASES]


def reading() -> str:
    """The database a read in this context goes to; the primary inside a transaction on it,
    whatever the context chose: a write reads what it locks, never what a replica shows."""
    alias = _reading.get()
    if alias == DEFAULT_DB_ALIAS or connections[DEFAULT_DB_ALIAS].in_atomic_block:
        return DEFAULT_DB_ALIAS
    return alias


@contextmanager
def reading_from(alias: str) -> Iterator[None]:
    """Reads in this block go to `alias` (`reading`): the ORM's, through `ReplicaRouter`, and
    `core.statements`' own."""
    token = _reading.set(alias)
    try:
        yield
    finally:
        _reading.reset(token)


def public_read(on_replica: Callable[[], T | None], on_primary: Callable[[], T]) -> T:
    """`on_replica()` on a replica that serves; when it answers None (it cannot answer for sure)
    or fails, and without replicas, `on_primary()`, which evaluates what is due."""
    alias = replica()
    if alias is not None:
        try:
            with reading_from(alias):
                found = on_replica()
        except (DatabaseError, psycopg.Error) as exc:
            failed(alias, exc)
        else:
            if found is not None:
                return found
    return on_primary()


class ReplicaRouter:
    """The ORM reads where `reading` says, and writes and migrates on the primary alone."""

    def db_for_read(self, model: Any, **hints: Any) -> str:
        return reading()

    def db_for_write(self, model: Any, **hints: Any) -> str:
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return db == DEFAULT_DB_ALIAS
