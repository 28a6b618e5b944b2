"""The A2A door under Django (WSGI, and any request the ASGI router leaves to Django): the view
turns the request into `a2a_gateway.endpoint`'s terms and its reply back into a response."""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from a2a_gateway.endpoint import JSON_TYPE, Reply, a2a_reply, card_reply, json_bytes
from core.errors import method_not_allowed
from core.policy import body_limit
from core.site import site_url


def _response(reply: Reply) -> HttpResponse:
    response = HttpResponse(reply.body, status=reply.status, content_type=JSON_TYPE)
    for name, value in reply.headers:
        response[name] = value
    return response


def _body(request: HttpRequest) -> bytes | None:
    """The body, or None when it is over the limit (read no further, parse nothing)."""
    limit = body_limit()
    try:
        if int(request.META.get("CONTENT_LENGTH") or 0) > limit:
            return None
    except ValueError:
        pass
    try:
        body = request.body
    except RequestDataTooBig:
        return None
    return None if len(body) > limit else body


def _not_allowed(request: HttpRequest, allowed: tuple[str, ...]) -> HttpResponse:
    refusal = method_not_allowed(request.method or "", allowed)
    return _response(Reply(405, json_bytes(refusal.as_body()), (("Allow", ", ".join(allowed)),)))


@csrf_exempt  # a public read: any other method gets 405, not a CSRF refusal
def agent_card(request: HttpRequest) -> HttpResponse:
    """`GET /.well-known/agent-card.json` (and `GET /api/a2a`): the card, served as the SDK's card route does."""
    if request.method not in ("GET", "HEAD"):
        return _not_allowed(request, ("GET", "HEAD"))
    return _response(card_reply(site_url(request), request.headers.get("If-None-Match")))


@csrf_exempt
async def a2a_endpoint(request: HttpRequest) -> HttpResponse:
    """`POST /api/a2a`: A2A 1.0 JSON-RPC. `GET` answers with the card: the endpoint documents itself."""
    if request.method in ("GET", "HEAD"):
        return agent_card(request)
    if request.method != "POST":
        return _not_allowed(request, ("GET", "HEAD", "POST"))
    headers = {key.lower(): value for key, value in request.headers.items()}
    reply = await a2a_reply(
        path=request.path, headers=headers, body=_body(request), origin=site_url(request)
    )
    return _response(reply)
