"""The feed, the task page and the Atom feed (SPEC §11). Every page shows a task's stored view, the
public view every door shows, so no page can show what the API would not."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.template.defaultfilters import pluralize
from django.template.loader import render_to_string
from django.utils import timezone

from core.caching import Shown, mark_shown
from core.clock import format_instant
from core.policy import AGENT_LINK_REL, TASK_MODES
from core.site import read_only, site_url
from ledger.verifier import verifier_packages
from tasks.models import Outcome, Task
from tasks.opening import grace_end
from tasks.payloads import VERDICTS
from tasks.public_reads import task_feed_page_shown, task_page_shown, task_shown
from tasks.rendered import stored_view, view_open_until
from web.pages import PAGE_SIZE, detail_page, instant, paged_list, time_left

ATOM_ENTRIES = 50
VERDICT_LABELS = {verdict: verdict.replace("_", " ").capitalize() for verdict in VERDICTS}

# What a void's code means to a reader (SPEC §4.1, §6, §15.8); an unknown code reads as itself.
VOID_LABELS = {
    "keys_unavailable": "the keypers did not release its key within their grace",
    "inconsistent_shares": "the keypers' released shares did not agree on one key",
    "invalid_payload": "it did not open to a report of the required shape",
    "unknown_schema": "it opened to a report of another schema",
    "source_not_in_task": "it cites a source that is not one of the task's",
    "private_content": "it holds private content, so neither it nor its ciphertext is published",
}


def _item_display(item: dict[str, Any]) -> dict[str, Any]:
    display = {**item, "received": instant(item["received_at"])}
    void = item.get("void")
    if void is not None:
        display["void"] = {**void, "label": VOID_LABELS.get(void["code"], void["code"])}
        return display
    report = item["report"]
    display.update(
        verdict_label=VERDICT_LABELS.get(report.get("verdict"), report.get("verdict")),
        # What was hashed, keys in JCS order, so a reader can copy it and recompute the digest.
        report_json=json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False),
    )
    return display


def task_display(view: dict[str, Any], *, now: datetime | None = None) -> dict[str, Any]:
    evaluation = view["evaluation"]
    items = evaluation["contributions"] if evaluation else []
    counts = evaluation["counts"] if evaluation else {}
    voids = [item["void"]["code"] for item in items if "void" in item]
    display = {
        **view,
        "deadline_at": instant(view["deadline"]),
        "created": instant(view["created_at"]),
        "evaluated": instant(view["evaluated_at"]),
        "is_open": view["state"] == "open",
        "outcome_label": Outcome(view["outcome"]).label if view["outcome"] else "",
        "verdict_label": VERDICT_LABELS.get(view["verdict"] or "", ""),
        # The evaluation counts every verdict (`tasks.evaluation`), and no other.
        "counts": [
            {"label": label, "count": counts[name]}
            for name, label in VERDICT_LABELS.items()
            if name in counts
        ],
        "contributions": [_item_display(item) for item in items],
        "keyper_sealed": sum("sealed" in item for item in items),
        "voids": len(voids),
        "void_codes": sorted(set(voids)),
    }
    if display["is_open"]:
        display["time_left"] = time_left(view["deadline"], now)
    return display


@read_only
def task_feed(request: HttpRequest) -> HttpResponse:
    def page(mode: str, cursor: str | None) -> dict[str, Any]:
        feed = task_feed_page_shown(mode=mode, limit=PAGE_SIZE, cursor=cursor)
        now = timezone.now()
        return {
            "tasks": [task_display(stored_view(task), now=now) for task in feed.tasks],
            "next_cursor": feed.next_cursor,
            "total": feed.total,
            "agent_rel": AGENT_LINK_REL,
        }

    def shown(page: dict[str, Any]) -> Shown:
        return Shown.listing(view_open_until(task) for task in page["tasks"])

    return paged_list(
        request, "tasks/feed.html", modes=TASK_MODES, nav="tasks", page=page, shown=shown
    )


@read_only
def task_detail(request: HttpRequest, task_id: str) -> HttpResponse:
    def shown(page: dict[str, Any]) -> Shown:
        return Shown.task(view_open_until(page["task"]))

    return detail_page(request, "task", task_shown, task_id, _task_page, shown=shown)


def _task_page(task: Task) -> dict[str, Any]:
    display = task_display(stored_view(task))
    if task.keys_pending and task.deadline <= timezone.now():
        display["awaiting_keys_until"] = instant(format_instant(grace_end(task)))
    return {"task": display, "agent_rel": AGENT_LINK_REL, "verifier_packages": verifier_packages()}


def _atom_summary(view: dict[str, Any]) -> str:
    """The outcome as the task page words it (`task_display`), in plain text."""
    display = task_display(view)
    verdict = f": {display['verdict_label']}" if display["verdict_label"] else ""
    tally = ", ".join(f"{count['label'].lower()} {count['count']}" for count in display["counts"])
    received = view["contributions_received"]
    sealed, voided = display["keyper_sealed"], display["voids"]
    keypers = f" {sealed} sealed to the keypers." if sealed else ""
    codes = ", ".join(display["void_codes"])
    voids = f" {voided} void, counted in no verdict ({codes})." if voided else ""
    return (
        f"{display['outcome_label']}{verdict}. {received} contribution{pluralize(received)} "
        f"of {view['min_independent']} needed ({tally}).{keypers}{voids}\n\n{view['question']}"
    )


@read_only
def task_atom(request: HttpRequest) -> HttpResponse:
    """Evaluated tasks as Atom 1.0, most recently evaluated first. Text constructs are type="text"
    and escaped by the template engine, so an agent's text can never become markup in a reader."""
    page = task_page_shown(
        statuses=TASK_MODES["evaluated"], limit=ATOM_ENTRIES, cursor=None, filter_key="web:atom"
    )
    site = site_url(request)
    views = [stored_view(task) for task in page.tasks]
    entries = [
        {
            "id": f"urn:uuid:{view['id']}",
            "title": view["title"],
            "link": f"{site}/a2a/tasks/{view['id']}",
            "published": view["created_at"],
            "updated": view["evaluated_at"],
            "summary": _atom_summary(view),
        }
        for view in views
    ]
    updated = entries[0]["updated"] if entries else format_instant(timezone.now())
    body = render_to_string(
        "tasks/feed.atom", {"site": site, "entries": entries, "updated": updated}, request=request
    )
    response = HttpResponse(body, content_type="application/atom+xml; charset=utf-8")
    return mark_shown(response, Shown.listing(view_open_until(view) for view in views))
