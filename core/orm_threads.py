"""The threads a request served outside Django's request handler runs its ORM work on.

Django's ASGI handler gives each request a thread of its own; a door served by its own ASGI app or
the gRPC server must too. On asgiref's one shared thread, a request waiting on PostgreSQL (a row
lock, a slow statement) held up every other request's ORM work in the process. A few threads cover
those waits: the GIL runs one thread's Python at a time anyway.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from itertools import cycle

from asgiref.sync import ThreadSensitiveContext

ORM_THREADS = 4
_threads = cycle(
    [ThreadPoolExecutor(max_workers=1, thread_name_prefix="cairn-orm") for _ in range(ORM_THREADS)]
)


def orm_thread() -> ThreadSensitiveContext:
    """The context inside which every thread-sensitive hop of one request runs on one thread, as a
    Django connection is used only by the thread that opened it. The threads are taken in turn and
    kept, so no request starts one."""
    return ThreadSensitiveContext(executor=next(_threads))
