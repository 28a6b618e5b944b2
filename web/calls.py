"""The web door for the keeper's open calls: the list and one call with its public answers (SPEC §7, §11)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse

from calls.models import Call, CallKind, Stance
from calls.selectors import call_detail, call_get, call_page, call_view
from core.caching import Shown
from core.policy import CALL_MODES
from core.site import read_only
from web.pages import PAGE_SIZE, detail_page, instant, paged_list

KIND_LABELS = dict(CallKind.choices)
STANCE_LABELS = dict(Stance.choices)


def call_display(view: dict[str, Any]) -> dict[str, Any]:
    display = {
        **view,
        "kind_label": KIND_LABELS.get(view["kind"], view["kind"]),
        "created": instant(view["created_at"]),
        "closed": instant(view["closed_at"]),
        "is_open": view["status"] == "open",
    }
    if "responses" in view:
        display["responses"] = [
            {
                **response,
                "stance_label": STANCE_LABELS.get(response["stance"] or "", ""),
                "created": instant(response["created_at"]),
            }
            for response in view["responses"]
        ]
    return display


@read_only
def call_list(request: HttpRequest) -> HttpResponse:
    def page(mode: str, cursor: str | None) -> dict[str, Any]:
        calls, next_cursor = call_page(mode=mode, limit=PAGE_SIZE, cursor=cursor)
        return {
            "calls": [call_display(call_view(call)) for call in calls],
            "next_cursor": next_cursor,
        }

    return paged_list(
        request, "calls/list.html", modes=CALL_MODES, nav="calls", page=page, shown=_changing
    )


@read_only
def call_page_view(request: HttpRequest, call_id: str) -> HttpResponse:
    def page(call: Call) -> dict[str, Any]:
        return {"call": call_display(call_detail(call))}

    return detail_page(request, "call", call_get, call_id, page, shown=_changing)


def _changing(_page: dict[str, Any]) -> Shown:
    """A call's page and the list: a call may be answered, posted or closed at any moment."""
    return Shown()
