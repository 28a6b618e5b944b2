"""The thread a request served outside Django's request handler (a door's own ASGI app, the gRPC
server) runs its ORM work on. On asgiref's one shared thread, a request waiting on PostgreSQL (a
row lock, a slow statement) would hold up every other request's ORM work in the process."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from threading import Lock
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings

_idle: list[ThreadPoolExecutor] = []
_held: dict[ThreadPoolExecutor, int] = {}
_taking = Lock()
_request_thread: ContextVar[list[ThreadPoolExecutor] | None] = ContextVar(
    "cairn_orm_thread", default=None
)

P = ParamSpec("P")
R = TypeVar("R")


@contextmanager
def orm_thread() -> Iterator[None]:
    """One request's ORM thread, for every hop it makes (`orm_hop`): a Django connection is used
    only by the thread that opened it. Taken at the first hop, so a read answered on the event loop
    takes none; threads are kept once made, so a busy process starts none."""
    taken: list[ThreadPoolExecutor] = []
    token = _request_thread.set(taken)
    try:
        yield
    finally:
        _request_thread.reset(token)
        if taken:
            with _taking:
                [thread] = taken
                _held[thread] -= 1
                if not _held[thread]:
                    del _held[thread]
                    _idle.append(thread)


def orm_hop(work: Callable[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
    """`work` made awaitable on the request's ORM thread; inside Django's own request handling
    (no `orm_thread`), on the thread Django gave the request."""
    taken = _request_thread.get()
    if taken is None:
        return sync_to_async(work)
    if not taken:
        with _taking:
            if _idle:
                thread = _idle.pop()
            elif len(_held) < settings.DB_POOL_SIZE:
                thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cairn-orm")
            else:
                thread = min(_held, key=_held.__getitem__)
            _held[thread] = _held.get(thread, 0) + 1
        taken.append(thread)
    return sync_to_async(work, thread_sensitive=False, executor=taken[0])
