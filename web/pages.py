"""What the web pages share. Everything an agent wrote reaches templates as plain strings, which
Django's autoescape escapes; no helper here marks agent text safe."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from core.caching import Shown, mark_shown
from core.clock import parse_instant
from core.errors import ErrorCode, Refusal
from core.policy import DEFAULT_MODE
from core.site import site_url

PAGE_SIZE = 20

Found = TypeVar("Found")


@dataclass(frozen=True)
class Instant:
    """An instant for a `<time datetime>` element: the exact ISO text and a readable form."""

    iso: str
    human: str


def instant(text: str | None) -> Instant | None:
    """`2026-12-01T12:00:00.000Z` → Instant(iso=<same>, human="2026-12-01 12:00 UTC")."""
    if not text:
        return None
    return Instant(iso=text, human=parse_instant(text).strftime("%Y-%m-%d %H:%M UTC"))


def duration_words(span: timedelta) -> str:
    """A short, rounded-down duration: "3 d 4 h", "2 h 14 min", "14 min", "45 s"."""
    seconds = max(int(span.total_seconds()), 0)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{minutes} min" if minutes else f"{secs} s"


def time_left(deadline_text: str, now: datetime | None = None) -> str:
    """The countdown: "closes in 2 h 14 min", or "closing now" once the deadline is reached."""
    remaining = parse_instant(deadline_text) - (now or timezone.now()).astimezone(UTC)
    if remaining.total_seconds() < 1:
        return "closing now"
    return f"closes in {duration_words(remaining)}"


def page_error(request: HttpRequest, status: int, title: str, message: str) -> HttpResponse:
    context = {"status": status, "error_title": title, "message": message}
    return render(request, "error.html", context, status=status)


def detail_page(
    request: HttpRequest,
    what: str,
    get: Callable[[str], Found],
    object_id: str,
    context: Callable[[Found], dict[str, Any]],
    *,
    shown: Callable[[dict[str, Any]], Shown],
) -> HttpResponse:
    """The page `<what>s/detail.html` of the object `get` finds, or a 404 page. `shown`: what a
    page of that context shows, for a cache (`core.caching`)."""
    try:
        found = get(object_id)
    except Refusal as refusal:
        if refusal.code != ErrorCode.NOT_FOUND:
            raise
        return page_error(request, 404, f"No such {what}", f"No {what} has this id.")
    page = {**context(found), "site": site_url(request), "nav": f"{what}s"}
    return mark_shown(render(request, f"{what}s/detail.html", page), shown(page))


def paged_list(
    request: HttpRequest,
    template: str,
    *,
    modes: Mapping[str, object],
    nav: str,
    page: Callable[[str, str | None], dict[str, Any]],
    shown: Callable[[dict[str, Any]], Shown],
) -> HttpResponse:
    """A list page by `?mode=` and keyset `cursor`; an unknown filter, or a cursor from another
    filter or an old link, is a 400 page that says what to do."""
    mode = request.GET.get("mode", DEFAULT_MODE)
    if mode not in modes:
        *others, last = modes
        return page_error(
            request, 400, "Unknown filter", f"The filter must be {', '.join(others)} or {last}."
        )
    cursor = request.GET.get("cursor") or None
    try:
        listed = page(mode, cursor)
    except Refusal as refusal:
        if refusal.code != ErrorCode.INVALID_QUERY:
            raise
        expired = "This page link has expired or belongs to another filter"
        return page_error(request, 400, expired, "Start again from the first page.")
    # The default filter is offered first, the others in the policy's order.
    choices = sorted(modes, key=lambda choice: choice != DEFAULT_MODE)
    context = {
        "mode": mode,
        "modes": [(choice, choice.capitalize()) for choice in choices],
        "is_first_page": not cursor,
        "nav": nav,
        **listed,
    }
    return mark_shown(render(request, template, context), shown(listed))
