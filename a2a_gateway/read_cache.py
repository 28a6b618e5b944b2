"""The answers of the one read (`a2a_gateway.reads`) for open tasks and ListTasks pages, kept in
the process's memory until a write changes them.

An evaluated task never changes and is kept apart (`a2a_gateway.evaluated_forms`). An open task
and a page change on any write: a contribution, a new task, an evaluation, in whichever process
made it (a web process, the worker, the gRPC server). So this cache is used only while it hears
every write:

- *The signal.* When a transaction that wrote tasks' forms commits, its process drops their
  answers and every page from its own cache, then sends a PostgreSQL notification naming the
  tasks (`announced`, called from `a2a_gateway.forms`, the one place every change of a task
  passes through). Each process has one listener thread on its own connection (`LISTEN`): a
  notification drops those tasks' answers and every page. The notification is a small
  transaction of its own after the write's, committed without waiting for the disk: inside the
  write's transaction it would take PostgreSQL's lock that serialises the commits of every
  notifying transaction, flush included, so concurrent writes would commit one at a time.
- *The bound.* Every half second the listener notifies itself on its own channel. Its echo comes
  back through the same queue, after every notification committed before it was sent, so a kept
  answer is served only while the last echo handled was sent at most `SILENCE_S` (1.5 s) ago: a
  notification is applied within that of its commit, usually within a millisecond or so. A
  listener that is stalled, or whose connection hangs or drops, stops being heard from and the
  cache goes unused until it is back, listening anew: nothing kept while it was deaf is served.
  No answer is kept longer than `KEEP_S` (5 s, as long as an HTTP cache may keep the same
  answer), so a write whose notification never left (its process died between its commit and
  the notification) is seen within that.
- *The deadline.* An answer that shows a task open holds only until that task's deadline
  (`StoredTask.open_until`, `StoredPage.open_until`): from then on the read runs again, and
  evaluates the task before showing it.
- *A read racing a write.* An answer is kept under the cache's generation as it was before its
  statement ran; any notification, and any change of the listener's state, moves the
  generation, so an answer read before a write that was heard meanwhile is not kept.

Only a read that sees everything committed when its statement runs may be kept: the read pool's
autocommit connections to the primary (`Source.reads_committed`). Django's connection may be
inside a transaction of its own (and is, in a test), and SQLite has no notifications: those
reads are never kept, so `make run`'s SQLite default serves every open task and page from the
database. A transaction pooler (`CAIRN_DB_POOLER=transaction`) cannot hold a `LISTEN`,
so behind one nothing is kept either.

The kept answers are what the read returned, never a rendering of their own, and are bounded by
their total length, the least recently read going first.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from psycopg.conninfo import make_conninfo

from core import statements

logger = logging.getLogger(__name__)

CHANNEL = "cairn_task_changed"
PING_S = 0.5
SILENCE_S = 1.5  # a kept answer is served only this soon after the last echo's ping was sent
KEEP_S = 5.0  # and never longer than this after it was read
# A notification's payload holds at most 8,000 bytes: this many task ids and their commas.
IDS_PER_NOTIFICATION = 200
# Sent after the write's commit, in a transaction of its own that does not wait for the disk.
NOTIFY_SQL = "SELECT set_config('synchronous_commit', 'off', true), pg_notify(%s, %s)"
RETRY_S = 1.0
MAX_CHARS = 8 * 1024 * 1024  # of the kept texts, for the open tasks and for the pages each
_OVERHEAD = 100  # a kept answer's objects and its place in the map, roughly, besides its texts


@dataclass(frozen=True)
class _Kept:
    value: Any
    valid_until: datetime | None  # the deadline of the first task it shows open; `KEEP_S` on
    size: int


class _Bounded:
    """Answers by key, least recently read first, within `max_chars`."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.entries: OrderedDict[Hashable, _Kept] = OrderedDict()
        self.chars = 0

    def get(self, key: Hashable, now: datetime) -> Any:
        kept = self.entries.get(key)
        if kept is None:
            return None
        if kept.valid_until is not None and now >= kept.valid_until:
            self.pop(key)
            return None
        self.entries.move_to_end(key)
        return kept.value

    def put(self, key: Hashable, kept: _Kept) -> None:
        if kept.size > self.max_chars:
            return
        self.pop(key)
        self.entries[key] = kept
        self.chars += kept.size
        while self.chars > self.max_chars:
            _, dropped = self.entries.popitem(last=False)
            self.chars -= dropped.size

    def pop(self, key: Hashable) -> None:
        kept = self.entries.pop(key, None)
        if kept is not None:
            self.chars -= kept.size

    def clear(self) -> None:
        self.entries.clear()
        self.chars = 0


class ReadCache:
    """The kept answers of one process: open tasks by (task, A2A version), pages by their checked
    query. Shared by every thread of the process; its listener starts with the first read that
    may be kept, and again in a forked child."""

    def __init__(self, max_chars: int = MAX_CHARS) -> None:
        self._lock = threading.Lock()
        self._tasks = _Bounded(max_chars)
        self._pages = _Bounded(max_chars)
        self._versions: set[str] = set()
        self._generation = 0
        self._heard_at: float | None = None  # when the last echoed ping was sent; None: deaf
        self._listener: _Listener | None = None
        self._pid = 0

    # -- reads

    def ticket(self) -> int | None:
        """The generation to keep a read's answer under, or None when nothing may be served or
        kept now (the listener is not, or not recently, heard from)."""
        if self._pid != os.getpid():
            self._start()
        heard_at = self._heard_at
        if heard_at is None or time.monotonic() - heard_at > SILENCE_S:
            return None
        return self._generation

    def task(self, key: uuid.UUID, version: str) -> Any:
        """The kept answer for this task in this version, or None."""
        with self._lock:
            return self._tasks.get((key, version), timezone.now())

    def page(self, query: Hashable) -> Any:
        """The kept page for this checked query, or None."""
        with self._lock:
            return self._pages.get(query, timezone.now())

    def keep_task(
        self,
        ticket: int | None,
        key: uuid.UUID,
        version: str,
        value: Any,
        text: str,
        open_until: datetime | None,
    ) -> None:
        """Keep an open task's answer, read under `ticket`, until its deadline `open_until`."""
        self._keep(
            ticket, self._tasks, (key, version), _Kept(value, open_until, len(text)), version
        )

    def keep_page(
        self,
        ticket: int | None,
        query: Hashable,
        value: Any,
        texts: Sequence[str],
        open_until: Iterable[datetime | None],
    ) -> None:
        """Keep a page, read under `ticket`, until the deadline of the first task it shows open."""
        valid_until = min(filter(None, open_until), default=None)
        size = sum(map(len, texts)) + _OVERHEAD
        self._keep(ticket, self._pages, query, _Kept(value, valid_until, size), None)

    def _keep(
        self, ticket: int | None, kept: _Bounded, key: Hashable, entry: _Kept, version: str | None
    ) -> None:
        if ticket is None:
            return
        now = timezone.now()
        if entry.valid_until is not None and entry.valid_until <= now:
            return
        latest = now + timedelta(seconds=KEEP_S)
        if entry.valid_until is None or entry.valid_until > latest:
            entry = _Kept(entry.value, latest, entry.size)
        with self._lock:
            if ticket != self._generation or self._heard_at is None:
                return
            if version is not None:
                self._versions.add(version)
            kept.put(key, entry)

    # -- what the listener and the writes tell it

    def changed(self, task_ids: Iterable[str]) -> None:
        """These tasks were written (their ids as text): drop their answers and every page."""
        with self._lock:
            self._generation += 1
            for text in task_ids:
                try:
                    key = uuid.UUID(text)
                except ValueError:
                    self._tasks.clear()
                    break
                for version in self._versions:
                    self._tasks.pop((key, version))
            self._pages.clear()

    def clear(self) -> None:
        """Drop every kept answer (a test's database emptied under the process, say)."""
        with self._lock:
            self._generation += 1
            self._tasks.clear()
            self._pages.clear()

    def _deaf(self) -> None:
        with self._lock:
            self._heard_at = None
            self._generation += 1
            self._tasks.clear()
            self._pages.clear()

    def _heard(self, sent_at: float) -> None:
        with self._lock:
            if self._heard_at is not None and sent_at > self._heard_at:
                self._heard_at = sent_at

    def _listening(self, sent_at: float) -> None:
        """The listener listens anew: what was kept before may have missed writes."""
        with self._lock:
            self._generation += 1
            self._tasks.clear()
            self._pages.clear()
            self._heard_at = sent_at

    # -- the listener

    def _start(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()
            self._heard_at = None
            self._generation += 1
            self._tasks.clear()
            self._pages.clear()
            if connection.vendor != "postgresql" or settings.CAIRN_DB_POOLER == "transaction":
                return
            self._listener = _Listener(self, _conninfo())
            self._listener.start()

    def stop(self) -> None:
        """Stop this process's listener, and so the cache, until the next `start`."""
        with self._lock:
            listener, self._listener = self._listener, None
            self._pid = 0
        if listener is not None:
            listener.stopping.set()
            listener.join(timeout=5)
        self._deaf()


# What Django's connection parameters hold besides libpq's: psycopg's own arguments.
_NOT_LIBPQ = ("cursor_factory", "context", "prepare_threshold")


def _conninfo() -> str:
    """Django's connection parameters (the primary's: notifications are not sent to replicas),
    with bounds of its own where the URL leaves room: a connection that hangs fails in seconds,
    not at the kernel's TCP timeout (the cache is off meanwhile in any case)."""
    parameters = {
        name: value
        for name, value in connection.get_connection_params().items()
        if name not in _NOT_LIBPQ
    }
    parameters.setdefault("application_name", "cairn-read-cache")
    parameters.setdefault("connect_timeout", 5)
    parameters.setdefault("keepalives_idle", 5)
    parameters.setdefault("keepalives_interval", 2)
    parameters.setdefault("keepalives_count", 2)
    return make_conninfo(**parameters)


class _Listener(threading.Thread):
    """Listens for the writes' notifications on its own connection and pings itself through the
    same queue (see the module's docstring); while it cannot, the cache is deaf."""

    def __init__(self, cache: ReadCache, conninfo: str) -> None:
        super().__init__(name="cairn-read-cache", daemon=True)
        self.cache, self.conninfo = cache, conninfo
        self.ping = f"cairn_read_cache_{uuid.uuid4().hex}"
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                self._listen()
            except Exception as exc:
                logger.warning("read cache listener lost: %s; reads go to the database", exc)
            self.cache._deaf()
            self.stopping.wait(RETRY_S)

    def _listen(self) -> None:
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            conn.execute(f"LISTEN {CHANNEL}")
            conn.execute(f"LISTEN {self.ping}")
            self.cache._listening(time.monotonic())
            while not self.stopping.is_set():
                conn.execute(NOTIFY_SQL, (self.ping, repr(time.monotonic())))
                for notify in conn.notifies(timeout=PING_S):
                    if notify.channel == self.ping:
                        self.cache._heard(float(notify.payload))
                    else:
                        self.cache.changed(notify.payload.split(","))


READ_CACHE = ReadCache()


def announced(task_ids: Sequence[uuid.UUID]) -> None:
    """These tasks' forms are written in the current transaction: when it commits, drop what this
    process kept of them, and notify every process's cache."""
    ids = [str(key) for key in task_ids]
    transaction.on_commit(lambda: _announce(ids))


def _announce(ids: list[str]) -> None:
    READ_CACHE.changed(ids)
    if connection.vendor != "postgresql":
        return
    try:
        for start in range(0, len(ids), IDS_PER_NOTIFICATION):
            payload = ",".join(ids[start : start + IDS_PER_NOTIFICATION])
            statements.fetch_all(NOTIFY_SQL, [CHANNEL, payload])
    except Exception as exc:  # committed all the same: other processes see it within `KEEP_S`
        logger.warning("tasks written but not announced to the read caches: %s", exc)
