"""Rule `cairn.rules/0.1` (SPEC §4.3): evaluate a task once, at its deadline, and never again."""

from __future__ import annotations

import gc
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from core import statements
from core.clock import format_instant, now_ms
from core.wire_names import EVALUATION_SCHEMA, RULE
from ledger import log_state
from ledger.entry_types import evaluation_entry
from ledger.jobs import sequencing_nudge
from ledger.services import log_queue
from tasks.changes import TaskChange, task_changed
from tasks.counts import task_count_change
from tasks.due import DUE
from tasks.models import Contribution, Outcome, Task, TaskStatus
from tasks.opening import RELEASES_AFTER, grace_end, sealed_item, sealed_opening
from tasks.payloads import VERDICTS
from tasks.rendered import RENDERED_FIELDS, task_render
from tasks.sealing import ContributionRow, report_unsealed
from tasks.selectors import task_sealed_site


def decide(verdicts: list[str], min_independent: int) -> tuple[Outcome, str | None]:
    """The fixed rule: too few reports → unresolved; any disagreement → contested; else resolved."""
    if len(verdicts) < min_independent:
        return Outcome.UNRESOLVED, None
    if len(set(verdicts)) == 1:
        return Outcome.RESOLVED, verdicts[0]
    return Outcome.CONTESTED, None


def _item(task: Task, contribution: ContributionRow) -> dict[str, Any]:
    if contribution.keyper_seal is None:  # sealed by the server (§4.3): opened from its seal
        return {
            "contribution_id": str(contribution.id),
            "received_at": format_instant(contribution.received_at),
            "report_digest": contribution.report_digest,
            **({"salt": contribution.salt} if contribution.salt else {}),
            "report": report_unsealed(contribution),
        }
    opening = sealed_opening(contribution, task, site=task_sealed_site(task.pk), final=True)
    assert opening is not None, "a final opening never waits"
    return sealed_item(contribution, opening)


def evaluation_apply(
    task: Task, contributions: Sequence[ContributionRow], *, evaluated_at: datetime
) -> TaskChange:
    """Set a still-working task's evaluation; the caller saves it and the change, under its lock."""
    items = [_item(task, contribution) for contribution in contributions]
    verdicts = [item["report"]["verdict"] for item in items if "void" not in item]
    outcome, verdict = decide(verdicts, task.min_independent)
    task.status = TaskStatus.FAILED if outcome == Outcome.UNRESOLVED else TaskStatus.COMPLETED
    task.outcome = outcome
    task.verdict = verdict or ""
    task.evaluated_at = task.status_timestamp = evaluated_at
    task.keys_pending = False
    task.evaluation = {
        "schema": EVALUATION_SCHEMA,
        "rule": RULE,
        "outcome": str(outcome),
        "verdict": verdict,
        "evaluated_at": format_instant(evaluated_at),
        "min_independent": task.min_independent,
        "counts": {name: verdicts.count(name) for name in VERDICTS},
        "contributions": items,
    }
    return TaskChange(task, task_render(task))


EVALUATION_FIELDS = [
    "status",
    "outcome",
    "verdict",
    "evaluated_at",
    "status_timestamp",
    "evaluation",
    "keys_pending",
    *RENDERED_FIELDS,
]


def _evaluations_write(
    batch: Sequence[Task], contributions: Mapping[uuid.UUID, Sequence[ContributionRow]]
) -> None:
    """Evaluate tasks the caller holds locked; write them, their read models, counts and entries."""
    changes = [
        evaluation_apply(task, contributions[task.pk], evaluated_at=now_ms()) for task in batch
    ]
    statements.write_all(
        *statements.updated_many(batch, EVALUATION_FIELDS), *task_changed(changes).writes
    )
    counts = Counter(task.status for task in batch)
    counts[TaskStatus.WORKING] -= len(batch)
    task_count_change(counts)
    log_queue(evaluation_entry(change.view) for change in changes)
    if batch:
        transaction.on_commit(sequencing_nudge)


def _evaluations_held() -> bool:
    """No task is evaluated while the log has gone back (SPEC §16.2): contributions the database
    lost may hold signed receipts, and an evaluation is final."""
    return log_state.rollback_found() is not None


def _task_locked(task_id: uuid.UUID) -> Task | None:
    found = statements.locked(
        Task, f"{statements.column(Task, 'id')} = %s", [statements.db_value(Task, "id", task_id)]
    )
    return found[0] if found else None


def task_evaluate(*, task_id: uuid.UUID) -> bool:
    """Evaluate a due task; True when this call did (the row lock lets exactly one caller write)."""
    if _evaluations_held():
        return False
    with transaction.atomic():
        task = _task_locked(task_id)
        if task is None or not DUE.holds(task, timezone.now()):
            return False
        _evaluations_write([task], {task.pk: list(task.contributions.order_by("seq"))})
    return True


def task_evaluate_with_releases(
    *, task_id: uuid.UUID, collected: Mapping[uuid.UUID, list[dict[str, Any]]]
) -> bool:
    """Keep the releases collected, then evaluate the task once every sealed report is opened or
    void for good. The caller collects outside any transaction: no lock waits on a keyper."""
    if _evaluations_held():
        return False
    with transaction.atomic():
        task = _task_locked(task_id)
        if task is None or task.status != TaskStatus.WORKING or not task.keys_pending:
            return False
        contributions = list(task.contributions.order_by("seq"))
        grown = [row for row in contributions if _releases_kept(row, collected.get(row.id, ()))]
        statements.write_all(*statements.updated_many(grown, ["releases"]))
        now = now_ms()
        if now < task.deadline + RELEASES_AFTER:
            return False
        site, final = task_sealed_site(task.pk), now >= grace_end(task)
        sealed = [row for row in contributions if row.keyper_seal is not None]
        if any(sealed_opening(row, task, site=site, final=final) is None for row in sealed):
            return False
        _evaluations_write([task], {task.pk: contributions})
    return True


def _releases_kept(contribution: Contribution, collected: Sequence[dict[str, Any]]) -> bool:
    """Keep releases from keypers it has none from (another worker may have some); True if any."""
    keypers = {release["keyper"] for release in contribution.releases}
    new = [release for release in collected if release["keyper"] not in keypers]
    contribution.releases = [*contribution.releases, *new]
    return bool(new)


def task_evaluated_if_due(task: Task) -> Task:
    """The task, evaluated first when it is due, so no door shows it open past its deadline."""
    if DUE.holds(task, timezone.now()):
        task_evaluate(task_id=task.pk)
        task.refresh_from_db()
    return task


# What the sweep reads of a task: not what the evaluation sets, nor the poster, which nothing it
# writes shows. A field left out but read after all would cost a query a task.
_SWEEP_READS = tuple(
    field.name
    for field in Task._meta.concrete_fields
    if field.name not in (*EVALUATION_FIELDS, "poster")
)
# Rows, not model objects, whose construction costs more than the read itself.
_CONTRIBUTION_FIELDS_READ = tuple(ContributionRow.__annotations__)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """A batch makes so many objects, none in cycles, that the collector would run again and again
    over Django's long-lived ones. The switch is the process's: other threads' cycles wait."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _batch_evaluate(batch_size: int) -> int:
    with transaction.atomic():
        batch = statements.locked(
            Task,
            DUE.sql(Task),
            DUE.params(statements.db_value(Task, "deadline", timezone.now())),
            names=_SWEEP_READS,
            order_by=statements.column(Task, "deadline"),
            limit=batch_size,
            skip_locked=True,
        )
        contributions: dict[uuid.UUID, list[ContributionRow]] = defaultdict(list)
        for contribution in (
            Contribution.objects.filter(task_id__in=[task.pk for task in batch])
            .order_by("seq")
            .values_list(*_CONTRIBUTION_FIELDS_READ, named=True)
        ):
            contributions[contribution.task_id].append(contribution)
        _evaluations_write(batch, contributions)
    return len(batch)


# Tasks a sweep's transaction evaluates: much smaller batches spend a noticeable share of the sweep
# waiting for commits' WAL to reach the disk; much larger ones cost more CPU a task than that saves.
BATCH_SIZE = 1000


def tasks_evaluate_due(*, batch_size: int = BATCH_SIZE) -> int:
    """Evaluate every due task, skipping rows another evaluator holds. List reads call this first
    and almost always find nothing due: one probe outside any transaction answers that."""
    if not DUE.any_now() or _evaluations_held():
        return 0
    evaluated = 0
    while True:
        with _collector_paused():
            done = _batch_evaluate(batch_size)
        evaluated += done
        if done < batch_size:
            return evaluated
