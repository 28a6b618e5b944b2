"""Cairn as a keyper (SPEC §15.8), while `CAIRN_KEYPER_KEY` is set. No token is asked: a release
rests on the log's proofs. Refusals are the §6 body with a witness's codes and statuses."""

from __future__ import annotations

import logging
import math

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_POST, require_safe

from core.clock import now_ms, parse_instant
from http_api.inputs import body_too_large
from http_api.witness import STATUS, body_within_limit, role_route
from ledger.keyper import keyper_description, keyper_enabled, keyper_release
from ledger.refusals import WitnessRefusal

logger = logging.getLogger(__name__)


def _refused(refusal: WitnessRefusal) -> JsonResponse:
    status = STATUS[refusal.kind]
    logger.info("keyper: refused a release (%s): %s", status, refusal.reason)
    if refusal.not_before is not None:
        response = JsonResponse({"not_before": refusal.not_before}, status=status)
        wait = (parse_instant(refusal.not_before) - now_ms()).total_seconds()
        response["Retry-After"] = str(max(1, math.ceil(wait)))
        return response
    issues = [{"path": refusal.path, "code": refusal.kind.value, "message": refusal.reason}]
    body = {"error": {"code": refusal.kind.value, "message": refusal.reason, "issues": issues}}
    return JsonResponse(body, status=status)


@role_route(keyper_enabled, "keyper", require_POST)
def release_view(request: HttpRequest) -> HttpResponse:
    body = body_within_limit(request)
    if body is None:
        return JsonResponse(body_too_large().as_body(), status=413)
    try:
        release = keyper_release(body)
    except WitnessRefusal as refusal:
        return _refused(refusal)
    return HttpResponse(release, content_type="application/json")


@role_route(keyper_enabled, "keyper", require_safe)
def keyper_view(request: HttpRequest) -> HttpResponse:
    return JsonResponse(keyper_description())
