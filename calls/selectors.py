from __future__ import annotations

from typing import Any

from calls.models import Call, CallResponse
from core.clock import format_instant
from core.cursors import keyset_page
from core.lookups import get_by_id
from core.policy import CALL_MODES


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
    return {
        "stance": response.stance or None,
        "body": response.body,
        "created_at": format_instant(response.created_at),
    }


def call_get(call_id: Any) -> Call:
    return get_by_id(Call, call_id, what="call")


def call_detail(call: Call) -> dict[str, Any]:
    return {
        **call_view(call),
        "responses": [call_response_view(r) for r in call.responses.order_by("id")],
    }


def call_page(*, mode: str, limit: int, cursor: str | None) -> tuple[list[Call], str]:
    """Newest first, by keyset; the cursor ("" on the last page) is bound to its mode."""
    matches = Call.objects.all()
    statuses = CALL_MODES[mode]
    if statuses is not None:
        matches = matches.filter(status__in=statuses)
    return keyset_page(
        matches, time_field="created_at", limit=limit, cursor=cursor, filter_key=f"calls:{mode}"
    )
