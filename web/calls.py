"""The web door for the keeper's open calls: the list and one call with its public answers (SPEC §7, §11)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from calls.models import CallKind, Stance
from calls.selectors import call_detail, call_get, call_page, call_view
from core.errors import ErrorCode, Refusal
from core.policy import CALL_MODES
from core.site import site_url
from web.pages import PAGE_SIZE, instant, page_error

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


@require_safe
def call_list(request: HttpRequest) -> HttpResponse:
    mode = request.GET.get("mode", "all")
    if mode not in CALL_MODES:
        return page_error(
            request,
            status=400,
            title="Unknown filter",
            message="The filter must be open, closed or all.",
        )
    cursor = request.GET.get("cursor") or None
    try:
        calls, next_cursor = call_page(mode=mode, limit=PAGE_SIZE, cursor=cursor)
    except Refusal as refusal:
        if refusal.code != ErrorCode.INVALID_QUERY:
            raise
        return page_error(
            request,
            status=400,
            title="This page link has expired or belongs to another filter",
            message="Start again from the first page.",
        )
    return render(
        request,
        "calls/list.html",
        {
            "mode": mode,
            "modes": [("all", "All"), ("open", "Open"), ("closed", "Closed")],
            "calls": [call_display(call_view(call)) for call in calls],
            "next_cursor": next_cursor or "",
            "is_first_page": not cursor,
            "nav": "calls",
        },
    )


@require_safe
def call_page_view(request: HttpRequest, call_id: str) -> HttpResponse:
    try:
        call = call_get(call_id)
    except Refusal as refusal:
        if refusal.code != ErrorCode.NOT_FOUND:
            raise
        return page_error(request, status=404, title="No such call", message="No call has this id.")
    return render(
        request,
        "calls/detail.html",
        {"call": call_display(call_detail(call)), "site": site_url(request), "nav": "calls"},
    )
