"""Cairn as a C2SP `tlog-witness` (SPEC §15.4), while `CAIRN_WITNESS_SIGNING_KEY` is set; its
refusals are plain text. No token is asked: the checkpoint's signature is the authentication."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import wraps
from typing import Concatenate, ParamSpec

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST, require_safe

from core.errors import ErrorCode, Refusal
from core.policy import body_limit
from http_api.inputs import body_too_large, declared_length
from ledger.refusals import Refused, WitnessRefusal
from ledger.witness import add_checkpoint, cosigned_latest, witness_description, witness_enabled
from ledger.witnesses import SIZE_CONTENT_TYPE

logger = logging.getLogger(__name__)

# The status of each refusal, at the witness's door and the keyper's (`ledger.refusals`).
STATUS = {
    Refused.MALFORMED: 400,
    Refused.BAD_SIGNATURE: 403,
    Refused.SHARE_DOES_NOT_OPEN: 403,
    Refused.UNKNOWN_LOG: 404,
    Refused.STALE_OLD_SIZE: 409,
    Refused.INCONSISTENT: 422,
    Refused.NOT_PROVEN: 422,
    Refused.TOO_EARLY: 425,
}
TEXT = "text/plain; charset=utf-8"

P = ParamSpec("P")
RouteView = Callable[Concatenate[HttpRequest, P], HttpResponse]


def role_route(
    enabled: Callable[[], bool], role: str, methods: Callable[[RouteView[P]], RouteView[P]]
) -> Callable[[RouteView[P]], RouteView[P]]:
    """A route of a role the site plays only when configured to (a witness, a keyper): an unknown
    path while it does not. Servers call it, not browsers, so there is no CSRF check."""

    def route(view: RouteView[P]) -> RouteView[P]:
        answering = methods(view)

        @wraps(view)
        def wrapped(request: HttpRequest, *args: P.args, **kwargs: P.kwargs) -> HttpResponse:
            if not enabled():
                refusal = Refusal(ErrorCode.NOT_FOUND, f"this site is not a {role}")
                return JsonResponse(refusal.as_body(), status=404)
            return answering(request, *args, **kwargs)

        return csrf_exempt(wrapped)

    return route


def _refused(status: int, reason: str) -> HttpResponse:
    logger.info("witness: refused a checkpoint (%s): %s", status, reason)
    return HttpResponse(reason + "\n", status=status, content_type=TEXT)


def body_within_limit(request: HttpRequest) -> bytes | None:
    """The body, or None when over the limit every door has (§6): a declared length over it is not
    read at all, and a chunked body is read one byte past it."""
    limit = body_limit()
    if declared_length(request) > limit:
        return None
    body = request.read(limit + 1)
    return None if len(body) > limit else body


@role_route(witness_enabled, "witness", require_POST)
def add_checkpoint_view(request: HttpRequest) -> HttpResponse:
    body = body_within_limit(request)
    if body is None:
        return _refused(413, body_too_large().message)
    try:
        cosignature = add_checkpoint(body)
    except WitnessRefusal as refusal:
        response = _refused(STATUS[refusal.kind], refusal.reason)
        if refusal.kind is Refused.STALE_OLD_SIZE:
            response.content = f"{refusal.size}\n".encode()
            response["Content-Type"] = SIZE_CONTENT_TYPE
        return response
    return HttpResponse(cosignature, content_type=TEXT)


@role_route(witness_enabled, "witness", require_safe)
def witness_view(request: HttpRequest) -> HttpResponse:
    return JsonResponse(witness_description())


@role_route(witness_enabled, "witness", require_safe)
def cosigned_checkpoint_view(request: HttpRequest, origin_digest: str) -> HttpResponse:
    """The latest checkpoint of that log this witness cosigned: what keypers prove against (§15.8)."""
    note = cosigned_latest(origin_digest)
    if note is None:
        refusal = Refusal(ErrorCode.NOT_FOUND, "this witness cosigned no checkpoint of that log")
        return JsonResponse(refusal.as_body(), status=404)
    response = HttpResponse(note, content_type=TEXT)
    response["Cache-Control"] = "no-cache"
    return response
