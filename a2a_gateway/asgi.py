"""The A2A door as a plain ASGI app for uvicorn, without Django's request cycle, whose middleware is
most of a JSON-RPC call's cost. Kept from it: Django's Host rule, the security and caching headers
(`core.caching`), and the request signals around the ORM work (`request_cycle`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import lru_cache, partial

from django.conf import settings
from django.http.request import split_domain_port, validate_host
from starlette.types import Receive, Scope, Send

from a2a_gateway import read_connections
from a2a_gateway.card import CARD_PATH
from a2a_gateway.http_json_binding import is_rest_path, rest_reply
from a2a_gateway.jsonrpc_binding import ENDPOINT_PATHS, http_reply
from a2a_gateway.stored_reads import DjangoSource
from a2a_gateway.transport import ClientGone, Reply
from core.caching import TOKEN_HEADER, answer_caching
from core.middleware import SECURITY_HEADERS
from core.orm_threads import orm_thread
from core.site import site_url

# Django's middleware adds these two as well (SecurityMiddleware, XFrameOptionsMiddleware).
RESPONSE_HEADERS = [
    (name.lower().encode(), value.encode("latin-1"))
    for name, value in {
        **SECURITY_HEADERS,
        "Cross-Origin-Opener-Policy": "same-origin",
        "X-Frame-Options": "DENY",
    }.items()
]
# What Django itself serves when DEBUG is on and ALLOWED_HOSTS is empty (HttpRequest.get_host).
DEBUG_HOSTS = [".localhost", "127.0.0.1", "[::1]"]
# The reads when the pool cannot serve them: through Django, inside its request signals.
_DJANGO_SOURCE = DjangoSource(in_request_cycle=True)


@lru_cache(maxsize=64)
def host_served(host: str) -> bool:
    """Whether Django would serve this Host (cached: its parsing is dear beside a stored read)."""
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = DEBUG_HOSTS
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed)


def is_a2a_path(path: str) -> bool:
    return path in ENDPOINT_PATHS or path == CARD_PATH or is_rest_path(path)


def _headers(scope: Scope) -> dict[str, str]:
    headers: dict[str, str] = {}
    for raw_name, raw_value in scope["headers"]:
        name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
        headers[name] = f"{headers[name]},{value}" if name in headers else value
    return headers


def _host(scope: Scope, headers: dict[str, str]) -> str:
    if "host" in headers:
        return headers["host"]
    server = scope.get("server") or ("", None)
    return server[0] if server[1] is None else f"{server[0]}:{server[1]}"


async def _chunks(receive: Receive) -> AsyncIterator[bytes]:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        yield message.get("body", b"")
        if not message.get("more_body", False):
            return


async def _send(send: Send, reply: Reply, method: str, headers: dict[str, str]) -> None:
    """Send the reply with its caching headers, or 304 in its place (`core.caching`)."""
    caching = answer_caching(
        method=method,
        token=TOKEN_HEADER.lower() in headers,
        if_none_match=headers.get("if-none-match"),
        status=reply.status,
        shown=reply.shown,
        body=lambda: reply.body,
        if_modified_since=headers.get("if-modified-since"),
    )
    status, body = reply.status, reply.body
    if caching is not None and caching.not_modified:
        status, body = 304, b""
    response_headers: list[tuple[bytes, bytes]] = []
    if status != 304:  # a 304 has no body, so none of its headers (RFC 9110 §15.4.5)
        response_headers.append((b"content-type", reply.content_type.encode()))
        response_headers.append((b"content-length", str(len(body)).encode()))
    response_headers += (
        (name.lower().encode(), value.encode("latin-1")) for name, value in reply.headers
    )
    if caching is not None:
        response_headers.append((b"cache-control", caching.cache_control.encode()))
        if caching.vary:
            response_headers.append((b"vary", ", ".join(caching.vary).encode()))
        if caching.etag is not None:
            response_headers.append((b"etag", caching.etag.encode()))
        if caching.last_modified is not None:
            response_headers.append((b"last-modified", caching.last_modified.encode()))
    response_headers += RESPONSE_HEADERS
    await send({"type": "http.response.start", "status": status, "headers": response_headers})
    await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})


async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
    headers = _headers(scope)
    host = _host(scope, headers)
    if not host_served(host):
        reply = Reply(
            400,
            b"Bad Request: this server does not answer to that Host",
            content_type="text/plain; charset=utf-8",
        )
        await _send(send, reply, scope["method"], headers)
        return
    try:
        binding = (
            partial(rest_reply, query_string=scope.get("query_string", b""))
            if is_rest_path(scope["path"])
            else http_reply
        )
        with orm_thread():
            reply = await binding(
                method=scope["method"],
                path=scope["path"],
                headers=headers,
                origin=site_url() or f"{scope.get('scheme', 'http')}://{host}",
                body=_chunks(receive),
                reads=read_connections.POOL_SOURCE
                if read_connections.is_available()
                else _DJANGO_SOURCE,
                outside_django=True,
            )
    except ClientGone:
        return
    await _send(send, reply, scope["method"], headers)
