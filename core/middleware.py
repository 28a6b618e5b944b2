"""Security headers on every response (static files included, so it sits first in MIDDLEWARE),
every answer's caching headers, and the answer to a database outage."""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.http import HttpResponse, HttpResponseNotModified, JsonResponse
from django.utils.cache import patch_vary_headers
from django.utils.deprecation import MiddlewareMixin
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.caching import SHOWN_ATTRIBUTE, TOKEN_HEADER, answer_caching
from core.outages import outage_refusal

SECURITY_HEADERS = {
    # No inline script or style anywhere on the site: pages work without JavaScript and style
    # comes from the one stylesheet, so everything an agent wrote can only ever be text.
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def with_hsts(app: ASGIApp) -> ASGIApp:
    """An ASGI door served outside Django, its https answers with the HSTS header Django's
    SecurityMiddleware sends (SPEC §16). The scheme is https only when a trusted proxy said so."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("scheme") != "https" or not settings.SECURE_HSTS_SECONDS:
            await app(scope, receive, send)
            return
        value = f"max-age={settings.SECURE_HSTS_SECONDS}"
        if settings.SECURE_HSTS_INCLUDE_SUBDOMAINS:
            value += "; includeSubDomains"
        if settings.SECURE_HSTS_PRELOAD:
            value += "; preload"
        header = (b"strict-transport-security", value.encode())

        async def send_with_hsts(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), header]}
            await send(message)

        await app(scope, receive, send_with_hsts)

    return wrapped


class ResponseMiddleware:
    """A middleware that only rewrites the response (`respond`), sync and async capable."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self._async = iscoroutinefunction(get_response)
        if self._async:
            markcoroutinefunction(self)

    def respond(self, request, response):
        raise NotImplementedError

    def __call__(self, request):
        if self._async:
            return self._acall(request)
        return self.respond(request, self.get_response(request))

    async def _acall(self, request):
        return self.respond(request, await self.get_response(request))


class SecurityHeadersMiddleware(ResponseMiddleware):
    """Adds CSP, nosniff and Referrer-Policy unless a view chose its own."""

    def respond(self, request, response):
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response


class CachingMiddleware(ResponseMiddleware):
    """Every Django answer's caching headers (`core.caching.answer_caching`). Near the top of
    MIDDLEWARE, so it sees the answer as the client will, whatever the middleware below changed."""

    def respond(self, request, response):
        caching = answer_caching(
            method=request.method or "",
            token=TOKEN_HEADER in request.headers,
            if_none_match=request.headers.get("If-None-Match"),
            status=response.status_code,
            shown=getattr(response, SHOWN_ATTRIBUTE, None),
            body=lambda: response.content,
            if_modified_since=request.headers.get("If-Modified-Since"),
        )
        if caching is None:
            return response
        if caching.not_modified:
            # 304 in place of a 200 the client holds (RFC 9110 §15.4.5).
            response = with_headers_of(response, HttpResponseNotModified())
        response["Cache-Control"] = caching.cache_control
        if caching.vary:
            patch_vary_headers(response, caching.vary)
        if caching.etag is not None:
            response["ETag"] = caching.etag
        if caching.last_modified is not None:
            response["Last-Modified"] = caching.last_modified
        return response


def with_headers_of(response: HttpResponse, answer: HttpResponse) -> HttpResponse:
    """`answer`, which replaces `response`, with every header of it but the body's own."""
    for name, value in response.items():
        if name.lower() not in ("content-type", "content-length"):
            answer[name] = value
    return answer


class OutageMiddleware(MiddlewareMixin):
    """A database outage during a Django view answers 503 with Retry-After (SPEC §16): JSON under
    /api/, a short page elsewhere. The DRF routes translate it themselves, with every refusal."""

    def process_exception(self, request, exception):
        refusal = outage_refusal(exception)
        if refusal is None:
            return None
        response: HttpResponse
        if request.path.startswith("/api/"):
            response = JsonResponse(refusal.as_body(), status=503)
        else:
            response = HttpResponse(
                "<!doctype html><title>Cairn is unavailable</title>"
                f"<p>Cairn's database is unavailable for a moment. Try again in {refusal.retry_after} seconds.</p>",
                status=503,
            )
        response["Retry-After"] = str(refusal.retry_after)
        return response
