"""The web door for tasks: the feed, the task page and the Atom feed of evaluated tasks (SPEC §11).

Every page shows a task's stored view (`tasks.rendered.stored_view`), the same public view every
other door shows, so nothing sealed or identifying can reach a page that the API would not show.
The only write a page causes is the domain's evaluation of what is due, before it reads.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.template.defaultfilters import pluralize
from django.template.loader import render_to_string
from django.utils import timezone
from django.views.decorators.http import require_safe

from core.caching import Shown, mark_shown
from core.clock import format_instant
from core.policy import AGENT_LINK_REL, TASK_MODES
from core.site import site_url
from tasks.evaluation import task_evaluated_if_due, tasks_evaluate_due
from tasks.models import Task
from tasks.rendered import stored_view, view_open_until
from tasks.selectors import task_feed_page, task_get, task_page
from web.pages import (
    OUTCOME_LABELS,
    PAGE_SIZE,
    VERDICT_LABELS,
    detail_page,
    instant,
    paged_list,
    time_left,
)

ATOM_ENTRIES = 50


def _report_display(item: dict[str, Any]) -> dict[str, Any]:
    report = item["report"]
    return {
        "contribution_id": item["contribution_id"],
        "received": instant(item["received_at"]),
        "report_digest": item["report_digest"],
        "salt": item.get("salt", ""),
        "verdict": report.get("verdict"),
        "verdict_label": VERDICT_LABELS.get(report.get("verdict"), report.get("verdict")),
        "summary": report.get("summary", ""),
        "conditions": report.get("conditions", []),
        "attempts": report.get("attempts", []),
        "limitations": report.get("limitations", []),
        "source_urls": report.get("source_urls", []),
        # What was hashed, keys in JCS order, so a reader can copy it and recompute the digest.
        "report_json": json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False),
    }


def task_display(view: dict[str, Any], *, now: datetime | None = None) -> dict[str, Any]:
    """The public view plus what a page needs to show it: readable instants, labels, time left."""
    evaluation = view["evaluation"]
    display = {
        **view,
        "deadline_at": instant(view["deadline"]),
        "created": instant(view["created_at"]),
        "evaluated": instant(view["evaluated_at"]),
        "is_open": view["state"] == "open",
        "outcome_label": OUTCOME_LABELS.get(view["outcome"] or "", ""),
        "verdict_label": VERDICT_LABELS.get(view["verdict"] or "", ""),
        "counts": [],
        "contributions": [],
    }
    if display["is_open"]:
        display["time_left"] = time_left(view["deadline"], now)
    if evaluation:
        counts = evaluation["counts"]
        names = [name for name in VERDICT_LABELS if name in counts] + sorted(
            set(counts) - set(VERDICT_LABELS)
        )
        display["counts"] = [
            {"verdict": name, "label": VERDICT_LABELS.get(name, name), "count": counts[name]}
            for name in names
        ]
        display["contributions"] = [_report_display(item) for item in evaluation["contributions"]]
        display["rule"] = evaluation["rule"]
    return display


@require_safe
def task_feed(request: HttpRequest) -> HttpResponse:
    def page(mode: str, cursor: str | None) -> dict[str, Any]:
        tasks_evaluate_due()
        feed = task_feed_page(mode=mode, limit=PAGE_SIZE, cursor=cursor)
        now = timezone.now()
        return {
            "tasks": [task_display(stored_view(task), now=now) for task in feed.tasks],
            "next_cursor": feed.next_cursor,
            "total": feed.total,
            "agent_rel": AGENT_LINK_REL,
        }

    return paged_list(
        request, "tasks/feed.html", modes=TASK_MODES, nav="tasks", page=page, shown=_feed_shown
    )


def _feed_shown(page: dict[str, Any]) -> Shown:
    return Shown.listing(view_open_until(task) for task in page["tasks"])


@require_safe
def task_detail(request: HttpRequest, task_id: str) -> HttpResponse:
    return detail_page(request, "task", task_get, task_id, _task_page, shown=_task_shown)


def _task_shown(page: dict[str, Any]) -> Shown:
    return Shown.task(view_open_until(page["task"]))


def _task_page(task: Task) -> dict[str, Any]:
    view = stored_view(task_evaluated_if_due(task))
    return {"task": task_display(view), "agent_rel": AGENT_LINK_REL}


def _atom_summary(view: dict[str, Any]) -> str:
    outcome = OUTCOME_LABELS.get(view["outcome"] or "", view["outcome"] or "")
    verdict = f": {VERDICT_LABELS.get(view['verdict'], view['verdict'])}" if view["verdict"] else ""
    counts = (view["evaluation"] or {}).get("counts", {})
    tally = ", ".join(
        f"{label.lower()} {counts[name]}"
        for name, label in VERDICT_LABELS.items()
        if name in counts
    )
    received = view["contributions_received"]
    return (
        f"{outcome}{verdict}. {received} contribution{pluralize(received)} "
        f"of {view['min_independent']} needed ({tally}).\n\n{view['question']}"
    )


@require_safe
def task_atom(request: HttpRequest) -> HttpResponse:
    """Evaluated tasks as Atom 1.0, most recently evaluated first. Text constructs are type="text"
    and escaped by the template engine, so an agent's text can never become markup in a reader."""
    tasks_evaluate_due()
    page = task_page(
        statuses=TASK_MODES["evaluated"], limit=ATOM_ENTRIES, cursor=None, filter_key="web:atom"
    )
    site = site_url(request)
    views = [stored_view(task) for task in page.tasks]
    entries = []
    for view in views:
        entries.append(
            {
                "id": f"urn:uuid:{view['id']}",
                "title": view["title"],
                "link": f"{site}/a2a/tasks/{view['id']}",
                "published": view["created_at"],
                "updated": view["evaluated_at"],
                "summary": _atom_summary(view),
            }
        )
    updated = entries[0]["updated"] if entries else format_instant(timezone.now())
    body = render_to_string(
        "tasks/feed.atom",
        {"site": site, "entries": entries, "updated": updated},
        request=request,
    )
    response = HttpResponse(body, content_type="application/atom+xml; charset=utf-8")
    return mark_shown(response, Shown.listing(view_open_until(view) for view in views))
