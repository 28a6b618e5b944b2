"""Cairn as a witness (SPEC §15.4): the C2SP `tlog-witness` door and its description.

Other logs' servers call it, not browsers, so CSRF does not apply and no token is asked: the
checkpoint's signature is the authentication. Its refusals are the protocol's: a status and a
one-line plain-text reason (a stale old size answers the witness's size as `text/x.tlog.size`).
While Cairn is no witness (no `CAIRN_WITNESS_SIGNING_KEY`) both routes are unknown paths.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import wraps

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST, require_safe

from core.errors import ErrorCode, Refusal
from core.policy import body_limit
from ledger.witness import (
    Refused,
    WitnessRefusal,
    add_checkpoint,
    witness_description,
    witness_enabled,
)

logger = logging.getLogger(__name__)

STATUS = {
    Refused.MALFORMED: 400,
    Refused.BAD_SIGNATURE: 403,
    Refused.UNKNOWN_LOG: 404,
    Refused.STALE_OLD_SIZE: 409,
    Refused.INCONSISTENT: 422,
}
TEXT = "text/plain; charset=utf-8"

View = Callable[[HttpRequest], HttpResponse]


def _when_witness(view: View) -> View:
    @wraps(view)
    def wrapped(request: HttpRequest) -> HttpResponse:
        if not witness_enabled():
            refusal = Refusal(ErrorCode.NOT_FOUND, "this site is not a witness")
            return JsonResponse(refusal.as_body(), status=404)
        return view(request)

    return wrapped


def _refused(status: int, reason: str) -> HttpResponse:
    logger.info("witness: refused a checkpoint (%s): %s", status, reason)
    return HttpResponse(reason + "\n", status=status, content_type=TEXT)


@csrf_exempt
@_when_witness
@require_POST
def add_checkpoint_view(request: HttpRequest) -> HttpResponse:
    limit = body_limit()
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    body = b"" if length > limit else request.read(limit + 1)  # chunked bodies have no length
    if length > limit or len(body) > limit:
        return _refused(413, f"the body is over {limit // 1024} KiB")
    try:
        cosignature = add_checkpoint(body)
    except WitnessRefusal as refusal:
        response = _refused(STATUS[refusal.kind], refusal.reason)
        if refusal.kind is Refused.STALE_OLD_SIZE:
            response.content = f"{refusal.size}\n".encode()
            response["Content-Type"] = "text/x.tlog.size"
        return response
    return HttpResponse(cosignature, content_type=TEXT)


@csrf_exempt  # a public read: any other method gets 405, not a CSRF refusal
@_when_witness
@require_safe
def witness_view(request: HttpRequest) -> HttpResponse:
    return JsonResponse(witness_description())
