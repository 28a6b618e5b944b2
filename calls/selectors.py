"""Reads of calls and their public answers, shared by every door."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.db.models import Q

from cairn.clock import format_instant
from cairn.cursors import cursor_decode, cursor_encode
from cairn.errors import ErrorCode, Refusal
from calls.models import Call, CallResponse, CallStatus


def call_view(call: Call) -> dict[str, Any]:
    return {
        "id": str(call.id),
        "title": call.title,
        "body": call.body,
        "kind": call.kind,
        "status": call.status,
        "created_at": format_instant(call.created_at),
        "closed_at": format_instant(call.closed_at) if call.closed_at else None,
        "responses_count": call.responses_count,
    }


def call_response_view(response: CallResponse) -> dict[str, Any]:
    """An answer as the public sees it: no agent id."""
    return {"stance": response.stance or None, "body": response.body, "created_at": format_instant(response.created_at)}


def call_get(call_id: Any) -> Call:
    try:
        key = call_id if isinstance(call_id, uuid.UUID) else uuid.UUID(str(call_id))
    except ValueError:
        raise Refusal(ErrorCode.NOT_FOUND, "no call has this id") from None
    call = Call.objects.filter(pk=key).first()
    if call is None:
        raise Refusal(ErrorCode.NOT_FOUND, "no call has this id")
    return call


def call_detail(call: Call) -> dict[str, Any]:
    return {**call_view(call), "responses": [call_response_view(r) for r in call.responses.order_by("id")]}


CALL_MODES: dict[str, frozenset[str] | None] = {
    "open": frozenset({CallStatus.OPEN}),
    "closed": frozenset({CallStatus.CLOSED}),
    "all": None,
}


def call_page(*, mode: str, limit: int, cursor: str | None) -> tuple[list[Call], str | None]:
    """Newest first, by keyset; the cursor is bound to its mode. Returns the calls and the next cursor."""
    calls = Call.objects.all()
    statuses = CALL_MODES[mode]
    if statuses is not None:
        calls = calls.filter(status__in=statuses)
    filter_key = f"calls:{mode}"
    if cursor:
        position = cursor_decode(cursor, filter_key)
        try:
            after_time, after_id = datetime.fromisoformat(position[0]), uuid.UUID(position[1])
        except (ValueError, TypeError, IndexError):
            raise Refusal(ErrorCode.INVALID_QUERY, "the cursor is not one this server issued") from None
        calls = calls.filter(Q(created_at__lt=after_time) | Q(created_at=after_time, pk__lt=after_id))
    rows = list(calls.order_by("-created_at", "-id")[: limit + 1])
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    return rows, cursor_encode(filter_key, [rows[-1].created_at.isoformat(), str(rows[-1].pk)])
