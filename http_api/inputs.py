"""The query, JSON body and Idempotency-Key of the plain HTTP routes, each refused with the SPEC §6
code of its part of the wire; judging a payload is the services'."""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest
from rest_framework.request import Request

from core.errors import ErrorCode, Issue, Refusal, invalid_query, refuse_if
from core.json_input import InvalidJson, ints_from_doubles, parse_json
from core.policy import DEFAULT_MODE, PAGE_CAP, body_limit

IDEMPOTENCY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
_IDEMPOTENCY_KEY = re.compile(r"[\x20-\x7e]{1,200}")
_DIGITS = re.compile(r"[0-9]{1,3}")


def query_issues(request: Request, allowed: Collection[str]) -> list[Issue]:
    """A parameter the route does not take, or one given twice: a typo is never silently ignored."""
    issues = []
    for key in request.query_params:
        if key not in allowed:
            expected = ", ".join(allowed) if allowed else "none"
            message = f"unknown query parameter (this route takes: {expected})"
            issues.append(Issue(key, ErrorCode.INVALID_QUERY, message))
        elif len(request.query_params.getlist(key)) > 1:
            issues.append(Issue(key, ErrorCode.INVALID_QUERY, "given more than once"))
    return issues


def query_none(request: Request) -> None:
    refuse_if(query_issues(request, ()))


def query_page(request: Request, *, modes: Collection[str]) -> tuple[str, int, str | None]:
    issues = query_issues(request, ("mode", "limit", "cursor"))
    params = request.query_params
    mode = params.get("mode", DEFAULT_MODE)
    if mode not in modes:
        issues.append(Issue("mode", ErrorCode.INVALID_QUERY, f"must be one of: {', '.join(modes)}"))
    raw_limit = params.get("limit", str(PAGE_CAP))
    limit = int(raw_limit) if _DIGITS.fullmatch(raw_limit) else 0
    if not 1 <= limit <= PAGE_CAP:
        issues.append(
            Issue("limit", ErrorCode.INVALID_QUERY, f"must be a whole number from 1 to {PAGE_CAP}")
        )
    refuse_if(issues)
    return mode, limit, params.get("cursor") or None


def declared_length(request: HttpRequest) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def body_too_large() -> Refusal:
    return Refusal(ErrorCode.PAYLOAD_TOO_LARGE, f"the body is over {body_limit() // 1024} KiB")


def json_body(request: Request) -> Any:
    """The body as JSON whatever its Content-Type, integral numbers as ints (as the A2A door reads
    them); a value that is not an object is the service's to refuse (`invalid_payload`)."""
    try:
        raw = request.body
    except RequestDataTooBig:  # a chunked body has no Content-Length for ApiView to check first
        raise body_too_large() from None
    try:
        return ints_from_doubles(parse_json(raw))
    except InvalidJson as error:
        raise Refusal(ErrorCode.INVALID_JSON, str(error)) from None


def operation_id(request: Request) -> str:
    """The write's operation id: the `Idempotency-Key` header, scoped to the agent by the services;
    without one, a fresh UUID, so a retry is a new write."""
    key = request.headers.get(IDEMPOTENCY_HEADER)
    if key is None:
        return str(uuid.uuid4())
    if not _IDEMPOTENCY_KEY.fullmatch(key):
        raise invalid_query(IDEMPOTENCY_HEADER, "must be 1 to 200 printable ASCII characters")
    return key
