"""The A2A door as a plain ASGI app, for uvicorn: `POST /api/a2a` and the card without Django's
request cycle.

Under Django's ASGI handler every request gets its own thread and passes the whole middleware
stack; for a JSON-RPC call that is most of its cost (bench/README.md, F6). Here a request costs
one body read, the SDK dispatcher, and the ORM work on asgiref's one shared thread. What the
middleware stack gave these two paths is kept: Django's Host rule, the security headers, and
Django's request signals around any request that may touch the database, so connections are
returned and checked exactly as under Django.
"""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.core import signals
from starlette.types import Receive, Scope, Send

from a2a_gateway.endpoint import JSON_TYPE, Reply, a2a_reply, card_reply, json_bytes
from core.errors import method_not_allowed
from core.hosts import host_served
from core.middleware import SECURITY_HEADERS
from core.policy import body_limit
from core.site import site_url

ENDPOINT_PATH = "/api/a2a"
# Some clients (the A2A 1.0 TCK among them) append a slash to the card's URL: the same endpoint.
ENDPOINT_PATHS = (ENDPOINT_PATH, ENDPOINT_PATH + "/")
CARD_PATH = "/.well-known/agent-card.json"
# Django's middleware adds these two as well (SecurityMiddleware, XFrameOptionsMiddleware).
RESPONSE_HEADERS = {
    **SECURITY_HEADERS,
    "Cross-Origin-Opener-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


class ClientGone(Exception):
    """The client disconnected before its body arrived: there is nobody to answer."""


def is_a2a_path(path: str) -> bool:
    return path in ENDPOINT_PATHS or path == CARD_PATH


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


async def _body(receive: Receive, headers: dict[str, str]) -> bytes | None:
    """The body, or None as soon as it is over the limit (the rest is never read)."""
    limit = body_limit()
    declared = headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _send(send: Send, reply: Reply, *, content_type: str, head: bool = False) -> None:
    headers = [
        ("content-type", content_type),
        ("content-length", str(len(reply.body))),
        *reply.headers,
        *RESPONSE_HEADERS.items(),
    ]
    await send(
        {
            "type": "http.response.start",
            "status": reply.status,
            "headers": [
                (name.lower().encode(), value.encode("latin-1")) for name, value in headers
            ],
        }
    )
    await send({"type": "http.response.body", "body": b"" if head else reply.body})


def _origin(scope: Scope, host: str) -> str:
    return site_url() or f"{scope.get('scheme', 'http')}://{host}"


async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
    headers = _headers(scope)
    host = _host(scope, headers)
    method = scope["method"]
    allowed = ("GET", "HEAD", "POST") if scope["path"] in ENDPOINT_PATHS else ("GET", "HEAD")
    if not host_served(host):
        reply = Reply(400, b"Bad Request: this server does not answer to that Host")
        await _send(send, reply, content_type="text/plain; charset=utf-8")
    elif method not in allowed:
        refusal = method_not_allowed(method, allowed)
        reply = Reply(405, json_bytes(refusal.as_body()), (("Allow", ", ".join(allowed)),))
        await _send(send, reply, content_type=JSON_TYPE)
    elif method in ("GET", "HEAD"):
        reply = card_reply(_origin(scope, host), headers.get("if-none-match"))
        await _send(send, reply, content_type=JSON_TYPE, head=method == "HEAD")
    else:
        await _answer_rpc(scope, receive, send, headers, _origin(scope, host))


async def _answer_rpc(
    scope: Scope, receive: Receive, send: Send, headers: dict[str, str], origin: str
) -> None:
    await sync_to_async(signals.request_started.send)(sender=endpoint, scope=scope)
    try:
        try:
            body = await _body(receive, headers)
        except ClientGone:
            return
        reply = await a2a_reply(path=scope["path"], headers=headers, body=body, origin=origin)
        await _send(send, reply, content_type=JSON_TYPE)
    finally:
        await sync_to_async(signals.request_finished.send)(sender=endpoint)
