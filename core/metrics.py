"""Cairn's Prometheus metrics counted as things happen (SPEC §16), per process: with several web
processes, set `PROMETHEUS_MULTIPROC_DIR` and `/metrics` adds them up. Numbers the database holds
are read at scrape time instead (`ops.collectors`)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from prometheus_client import Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.errors import Refusal

REQUESTS = Counter(
    "cairn_requests",
    "HTTP requests answered, by door, method and status.",
    ["door", "method", "status"],
)
REQUEST_DURATION = Histogram(
    "cairn_request_duration_seconds", "Time to answer an HTTP request.", ["door", "method"]
)
# The gRPC binding's calls, by the names gRPC gives them: the method (`GetTask`) and the status
# code (`OK`, `NOT_FOUND`), which are not HTTP's, so they are not mixed into `cairn_requests`.
GRPC_REQUESTS = Counter(
    "cairn_grpc_requests", "gRPC calls answered, by method and status code.", ["method", "code"]
)
GRPC_REQUEST_DURATION = Histogram(
    "cairn_grpc_request_duration_seconds", "Time to answer a gRPC call.", ["method"]
)
WRITES = Counter(
    "cairn_writes",
    "Writes by kind and result (accepted, refused, replayed); `code` is the refusal's code.",
    ["kind", "result", "code"],
)

P = ParamSpec("P")
R = TypeVar("R")


def counted_write(kind: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Count each call of a write service by its result: accepted, replayed, or refused (by code)."""

    def decorate(service: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(service)
        def counted(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                result = service(*args, **kwargs)
            except Refusal as refusal:
                WRITES.labels(kind, "refused", str(refusal.code)).inc()
                raise
            replayed = getattr(result, "replayed", False)
            WRITES.labels(kind, "replayed" if replayed else "accepted", "").inc()
            return result

        return counted

    return decorate


def door_of(path: str) -> str:
    if path in ("/api/a2a", "/.well-known/agent-card.json") or path.startswith("/api/a2a/"):
        return "a2a"
    if path.startswith("/api/mcp"):
        return "mcp"
    if path.startswith("/api/"):
        return "http"
    if path.startswith("/admin/"):
        return "admin"
    return "web"


def with_request_metrics(app: ASGIApp) -> ASGIApp:
    """Wrap an ASGI app so every HTTP request is counted and timed under its door."""

    async def measured(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        door, method = door_of(scope["path"]), scope["method"]
        started = time.perf_counter()
        status = 500

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await app(scope, receive, send_and_note)
        finally:
            _series(REQUEST_DURATION, door, method).observe(time.perf_counter() - started)
            _series(REQUESTS, door, method, str(status)).inc()

    return measured


def grpc_call_observed(method: str, code: str, seconds: float) -> None:
    _series(GRPC_REQUEST_DURATION, method).observe(seconds)
    _series(GRPC_REQUESTS, method, code).inc()


# Each labelled series looked up once: `labels()` checks its arguments on every call, a cost a
# stored read should not pay on every request. The servers parse a fixed set of methods.
@functools.lru_cache(maxsize=4096)
def _series(metric: Any, *labels: str) -> Any:
    return metric.labels(*labels)
