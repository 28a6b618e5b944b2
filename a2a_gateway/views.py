"""The A2A door under Django (WSGI, and what the ASGI router leaves to Django)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from a2a_gateway.card import card_reply
from a2a_gateway.http_json_binding import rest_reply
from a2a_gateway.jsonrpc_binding import http_reply
from a2a_gateway.transport import Reply
from core.caching import mark_shown
from core.site import site_url

_CHUNK = 64 * 1024


def _response(reply: Reply) -> HttpResponse:
    """Marked with what it shows, for `core.middleware.CachingMiddleware`'s caching headers."""
    response = HttpResponse(reply.body, status=reply.status, content_type=reply.content_type)
    for name, value in reply.headers:
        response[name] = value
    return response if reply.shown is None else mark_shown(response, reply.shown)


async def _chunks(request: HttpRequest) -> AsyncIterator[bytes]:
    while chunk := request.read(_CHUNK):
        yield chunk


@csrf_exempt  # a public read: any other method gets 405, not a CSRF refusal
def agent_card(request: HttpRequest) -> HttpResponse:
    """`GET /.well-known/agent-card.json`: the card, served as the SDK's card route does."""
    return _response(card_reply(method=request.method or "", site=site_url(request)))


@csrf_exempt
async def a2a_endpoint(request: HttpRequest, operation: str = "") -> HttpResponse:
    """`/api/a2a`: JSON-RPC (`jsonrpc_binding`); `/api/a2a/<operation>`: HTTP+JSON."""
    query_string = request.META.get("QUERY_STRING", "").encode("latin-1")
    binding = partial(rest_reply, query_string=query_string) if operation else http_reply
    reply = await binding(
        method=request.method or "",
        path=request.path,
        headers={key.lower(): value for key, value in request.headers.items()},
        origin=site_url(request),
        body=_chunks(request),
    )
    return _response(reply)
