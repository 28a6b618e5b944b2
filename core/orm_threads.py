"""The thread a request served outside Django's request handler runs its ORM work on.

Django's ASGI handler gives each request a thread of its own; a door served by its own ASGI app or
the gRPC server must too. On asgiref's one shared thread, a request waiting on PostgreSQL (a row
lock, a slow statement) held up every other request's ORM work in the process. A few threads cover
those waits: the GIL runs one thread's Python at a time anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import cycle
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import sync_to_async

ORM_THREADS = 4
_threads = cycle(
    [ThreadPoolExecutor(max_workers=1, thread_name_prefix="cairn-orm") for _ in range(ORM_THREADS)]
)
_request_thread: ContextVar[ThreadPoolExecutor | None] = ContextVar(
    "cairn_orm_thread", default=None
)

P = ParamSpec("P")
R = TypeVar("R")


@contextmanager
def orm_thread() -> Iterator[None]:
    """One request's ORM thread, for every hop it makes (`orm_hop`): a Django connection is used
    only by the thread that opened it. The threads are taken in turn and kept, so no request
    starts one."""
    token = _request_thread.set(next(_threads))
    try:
        yield
    finally:
        _request_thread.reset(token)


def orm_hop(work: Callable[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
    """`work` made awaitable on the request's ORM thread; inside Django's own request handling
    (no `orm_thread`), on the thread Django gave the request."""
    thread = _request_thread.get()
    if thread is None:
        return sync_to_async(work)
    return sync_to_async(work, thread_sensitive=False, executor=thread)
