"""One translation of domain refusals and HTTP faults into SPEC §6 bodies and statuses."""

from __future__ import annotations

from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from core.errors import ErrorCode, Refusal, method_not_allowed
from core.outages import outage_refusal
from core.policy import WWW_AUTHENTICATE

STATUS_BY_CODE: dict[ErrorCode, int] = {
    ErrorCode.INVALID_PAYLOAD: 422,
    ErrorCode.UNKNOWN_SCHEMA: 422,
    ErrorCode.SOURCE_NOT_ALLOWED: 422,
    ErrorCode.SOURCE_NOT_IN_TASK: 422,
    ErrorCode.DEADLINE_OUT_OF_RANGE: 422,
    ErrorCode.PRIVATE_CONTENT: 422,
    ErrorCode.APPROVAL_REQUIRED: 422,
    ErrorCode.PREVIEW_CHANGED: 422,
    ErrorCode.DUPLICATE_CONTRIBUTION: 409,
    ErrorCode.OWN_TASK: 409,
    ErrorCode.TASK_FULL: 409,
    ErrorCode.TASK_CLOSED: 409,
    ErrorCode.IDEMPOTENCY_CONFLICT: 409,
    ErrorCode.DUPLICATE_RESPONSE: 409,
    ErrorCode.CALL_CLOSED: 409,
    ErrorCode.CALL_FULL: 409,
    ErrorCode.DAILY_CAP: 429,
    ErrorCode.OPEN_TASK_CAP: 429,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.INVALID_QUERY: 400,
    ErrorCode.INVALID_JSON: 400,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.METHOD_NOT_ALLOWED: 405,
    ErrorCode.NOT_ACCEPTABLE: 406,
    ErrorCode.PAYLOAD_TOO_LARGE: 413,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.UNAVAILABLE: 503,
}


def _as_refusal(exc: Exception, context: dict) -> Refusal | None:
    """Only the framework faults these views meet: DRF's parsers never run (`json_body` reads the
    body), and the bearer authentication never fails, it only finds no agent."""
    if isinstance(exc, Refusal):
        return exc
    if isinstance(exc, exceptions.NotAuthenticated):
        return Refusal(
            ErrorCode.UNAUTHORIZED,
            "a valid Bearer token is required (POST /api/agent/register issues one)",
        )
    if isinstance(exc, exceptions.NotAcceptable):
        return Refusal(
            ErrorCode.NOT_ACCEPTABLE,
            "every answer here is application/json: send an Accept header that admits it "
            "(application/json, or */*), or none",
        )
    if isinstance(exc, exceptions.MethodNotAllowed):
        return method_not_allowed(context["request"].method, context["view"].allowed_methods)
    return outage_refusal(exc)


def exception_handler(exc: Exception, context: dict) -> Response | None:
    refusal = _as_refusal(exc, context)
    if refusal is None:
        return drf_exception_handler(exc, context)
    response = Response(refusal.as_body(), status=STATUS_BY_CODE[refusal.code])
    if refusal.retry_after is not None:
        response["Retry-After"] = str(refusal.retry_after)
    if refusal.code == ErrorCode.UNAUTHORIZED:
        response["WWW-Authenticate"] = WWW_AUTHENTICATE
    return response
