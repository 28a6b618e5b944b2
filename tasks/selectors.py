"""Reads, and only reads. Every door shows a task's stored view, so every door shows the same."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q

from agents.models import Agent
from core import statements
from core.clock import format_instant
from core.cursors import cursor_decode, cursor_encode, keyset_page
from core.errors import ErrorCode, Refusal
from core.lookups import get_by_id, id_or_not_found
from core.policy import TASK_MODES
from ledger.entry_types import TASK as TASK_ENTRY
from ledger.logs import InLog, leaf_in_log
from ledger.models import Leaf
from ledger.notes import log_origin
from tasks.counts import task_count
from tasks.models import Contribution, Task, TaskStatus
from tasks.rendered import RENDERED_FIELDS, stored_view
from tasks.sealing import contribution_report


def receipt_claims(contribution: Contribution) -> dict[str, str]:
    """What the receipt's signature covers (§4.2, §15.2); the server has no keyper-sealed report."""
    seal = contribution.keyper_seal
    if seal is not None:
        sealed = {
            "commitment": seal["commitment"],
            "ciphertext_digest": seal["ciphertext_digest"],
            "sealed": "keypers",
        }
    else:
        sealed = {
            "report_digest": contribution.report_digest,
            **({"salt": contribution.salt} if contribution.salt else {}),
        }
    return {
        "contribution_id": str(contribution.id),
        "task_id": str(contribution.task_id),
        "operation_id": contribution.operation_id,
        **sealed,
        "received_at": format_instant(contribution.received_at),
        "sealed_until": contribution.task.deadline_text,
    }


def receipt_view(contribution: Contribution) -> dict[str, str]:
    return {**receipt_claims(contribution), "signature": contribution.receipt_signature}


def task_entry_logged(task_id: uuid.UUID) -> InLog | None:
    """The log holding the task's own entry, its first (SPEC §15.3), and its index there; None while
    it waits for the sequencer. A sealed contribution names it even after a later log (§16.2)."""
    first = (
        Leaf.objects.filter(task_id=task_id).order_by("index").values_list("index", "entry").first()
    )
    if first is None or json.loads(first[1]).get("type") != TASK_ENTRY:
        return None
    return leaf_in_log(first[0])


def task_sealed_site(task_id: uuid.UUID) -> str:
    """What a keyper-sealed contribution is bound to (§15.8): the task entry's log's origin."""
    logged = task_entry_logged(task_id)
    return log_origin() if logged is None else logged.log.origin


def task_get(task_id: str | uuid.UUID) -> Task:
    return get_by_id(Task, task_id, what="task")


@dataclass(frozen=True)
class TaskPage:
    tasks: list[Task]
    next_cursor: str  # "" on the last page
    total: int


def task_page(
    *, statuses: frozenset[str] | None, limit: int, cursor: str | None, filter_key: str
) -> TaskPage:
    """One page of tasks by keyset (`core.cursors`), newest status first."""
    matches = Task.objects.all()
    if statuses is not None:
        matches = matches.filter(status__in=statuses)
    rows, next_cursor = keyset_page(
        matches, time_field="status_timestamp", limit=limit, cursor=cursor, filter_key=filter_key
    )
    return TaskPage(tasks=rows, next_cursor=next_cursor, total=task_count(statuses))


def _feed_rows(section: str, after: tuple[datetime, uuid.UUID] | None, limit: int) -> list[Task]:
    if section == "open":
        rows = Task.objects.filter(status=TaskStatus.WORKING)
        if after is not None:
            rows = rows.filter(Q(deadline__gt=after[0]) | Q(deadline=after[0], pk__gt=after[1]))
        return list(rows.order_by("deadline", "pk")[:limit])
    rows = Task.objects.exclude(status=TaskStatus.WORKING)
    if after is not None:
        rows = rows.filter(
            Q(status_timestamp__lt=after[0]) | Q(status_timestamp=after[0], pk__lt=after[1])
        )
    return list(rows.order_by("-status_timestamp", "-pk")[:limit])


def task_feed_page(*, mode: str, limit: int, cursor: str | None) -> TaskPage:
    """The web feed: open tasks closing soonest first, then evaluated ones, latest first."""
    filter_key = f"web:{mode}"
    sections = ("open", "evaluated") if mode == "all" else (mode,)
    first, after = 0, None
    if cursor:
        try:
            section, at, pk = cursor_decode(cursor, filter_key)
            first = sections.index(section)  # one of its own mode's, or a cursor made elsewhere
            after = (datetime.fromisoformat(at), uuid.UUID(pk))
        except (ValueError, TypeError):
            message = "the cursor is not one this server issued"
            raise Refusal(ErrorCode.INVALID_QUERY, message) from None
    rows: list[Task] = []
    for name in sections[first:]:
        rows += _feed_rows(name, after, limit + 1 - len(rows))
        after = None
        if len(rows) > limit:
            break
    next_cursor = ""
    if len(rows) > limit:
        rows = rows[:limit]
        last = rows[-1]
        if last.status == TaskStatus.WORKING:
            section, at = "open", last.deadline
        else:
            section, at = "evaluated", last.status_timestamp
        next_cursor = cursor_encode(filter_key, [section, at.isoformat(), str(last.pk)])
    return TaskPage(tasks=rows, next_cursor=next_cursor, total=task_count(TASK_MODES[mode]))


def agent_mine(agent: Agent) -> dict[str, Any]:
    """Its own tasks and contributions, its sealed reports included, newest first."""
    tasks = Task.objects.filter(poster=agent).order_by("-created_at", "-id")
    contributions = (
        Contribution.objects.filter(agent=agent)
        .select_related("task")
        .order_by("-received_at", "-seq")
    )
    return {
        "tasks": [stored_view(task) for task in tasks],
        "contributions": [
            {
                "task_id": str(c.task_id),
                "receipt": receipt_view(c),
                "report": contribution_report(c),
            }
            for c in contributions
        ],
    }


# What a write reads of a task: every column but the stored forms, which it renders anew.
_WRITE_FIELDS = tuple(
    field.attname for field in Task._meta.concrete_fields if field.name not in RENDERED_FIELDS
)


def task_get_for_write(task_id: Any) -> Task:
    """`task_get` in one prepared statement, without the stored forms."""
    key = id_or_not_found(task_id, what="task")
    row = statements.fetch_one(_task_for_write(), [statements.db_value(Task, "id", key)])
    if row is None:
        raise Refusal(ErrorCode.NOT_FOUND, "no task has this id")
    return statements.instance(Task, _WRITE_FIELDS, row)


@statements.prepared
def _task_for_write() -> str:
    return (
        f"SELECT {statements.columns(Task, _WRITE_FIELDS)} FROM {statements.table(Task)} "
        f"WHERE {statements.column(Task, 'id')} = %s"
    )
