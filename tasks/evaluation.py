"""Rule `cairn.rules/0.1` (SPEC §4.3): evaluate a task once, at its deadline, and never again."""

from __future__ import annotations

import gc
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Protocol

from django.db import transaction
from django.utils import timezone

from core import statements
from core.clock import format_instant, now_ms
from ledger import log_state
from ledger.entries import evaluation_entry
from ledger.jobs import sequencing_nudge
from ledger.notes import log_origin
from ledger.services import log_queue
from tasks.changes import TaskChange, task_changed
from tasks.counts import task_count_change
from tasks.due import DUE
from tasks.models import Contribution, Outcome, Task, TaskStatus
from tasks.opening import KeyperSealed, grace_end, releases_from, sealed_item, sealed_opening
from tasks.payloads import VERDICTS
from tasks.rendered import RENDERED_FIELDS, task_render
from tasks.sealing import Sealed, report_unsealed

EVALUATION_SCHEMA = "cairn.evaluation/0.1"
RULE = "cairn.rules/0.1"


def decide(verdicts: list[str], min_independent: int) -> tuple[Outcome, str | None]:
    """The fixed rule: too few reports → unresolved; any disagreement → contested; else resolved."""
    if len(verdicts) < min_independent:
        return Outcome.UNRESOLVED, None
    if len(set(verdicts)) == 1:
        return Outcome.RESOLVED, verdicts[0]
    return Outcome.CONTESTED, None


class Counted(Sealed, KeyperSealed, Protocol):
    """What an evaluation reads of a contribution."""

    @property
    def report_digest(self) -> str: ...

    @property
    def salt(self) -> str: ...

    @property
    def received_at(self) -> datetime: ...


def _plain_item(contribution: Counted, *, received_at: str) -> dict[str, Any]:
    """The item of a report sealed by the server (§4.3), opened from its seal."""
    return {
        "contribution_id": str(contribution.id),
        "received_at": received_at,
        "report_digest": contribution.report_digest,
        **({"salt": contribution.salt} if contribution.salt else {}),
        "report": report_unsealed(contribution),
    }


def _item(task: Task, contribution: Counted) -> dict[str, Any]:
    received_at = format_instant(contribution.received_at)
    if contribution.keyper_seal is None:
        return _plain_item(contribution, received_at=received_at)
    opening = sealed_opening(contribution, task, site=log_origin(), final=True)
    assert opening is not None, "a final opening never waits"
    return sealed_item(contribution, opening, received_at=received_at)


def _keys_settled(task: Task, contributions: Sequence[Counted], *, at: datetime) -> bool:
    """Whether every keyper-sealed report of the task is opened or void for good at `at`: what
    the worker waits for before it evaluates a task whose keys were pending."""
    final = at >= grace_end(task)
    site = log_origin()
    return all(
        sealed_opening(contribution, task, site=site, final=final) is not None
        for contribution in contributions
        if contribution.keyper_seal is not None
    )


def evaluation_apply(
    task: Task, contributions: Sequence[Counted], *, evaluated_at: datetime
) -> TaskChange:
    """Set the evaluation fields of a still-working task from its contributions, in received order,
    their reports opened into the evaluation, the reports' public copy (from the server's seal, or
    from the keypers' releases); and render its view again. Counts and outcome are over the
    reports that are not void. Saving the task (`EVALUATION_FIELDS`) and its read models' rows
    (`task_changed` of the change returned) is the caller's, under its row lock."""
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


def _evaluation_write(
    task: Task, contributions: Sequence[Counted], *, evaluated_at: datetime
) -> None:
    """Evaluate a task whose row the caller holds locked, and write it, its read models, its count
    and its log entry."""
    change = evaluation_apply(task, contributions, evaluated_at=evaluated_at)
    statements.write_all(
        statements.updated(task, EVALUATION_FIELDS), *task_changed([change]).writes
    )
    task_count_change({TaskStatus.WORKING: -1, task.status: 1})
    log_queue([evaluation_entry(task)])
    transaction.on_commit(sequencing_nudge)


def _evaluations_held() -> bool:
    """While the log has gone back (SPEC §16.2) no task is evaluated: contributions the database
    lost may hold signed receipts, and an evaluation is final. Reads show what is stored."""
    return log_state.rollback_found() is not None


def _task_locked(task_id: uuid.UUID) -> Task | None:
    """The task, its row locked until the transaction ends; None when there is no such task."""
    found = statements.locked(
        Task, f"{statements.column(Task, 'id')} = %s", [statements.db_value(Task, "id", task_id)]
    )
    return found[0] if found else None


def task_evaluate(*, task_id: uuid.UUID) -> bool:
    """Evaluate a task whose deadline has passed. True when this call did it.

    Safe to call from any number of workers and readers at once: the row lock and the
    "still working" guard let exactly one of them write, and the result never changes. A task
    whose keys are pending is left to the worker (`task_evaluate_with_releases`): its reports
    cannot be opened before the keypers release their shares.
    """
    if _evaluations_held():
        return False
    with transaction.atomic():
        task = _task_locked(task_id)
        if task is None or not DUE.holds(task, timezone.now()):
            return False
        _evaluation_write(task, list(task.contributions.order_by("seq")), evaluated_at=now_ms())
    return True


def task_evaluate_with_releases(
    *, task_id: uuid.UUID, collected: Mapping[uuid.UUID, list[dict[str, Any]]]
) -> bool:
    """Keep the releases collected for a task's keyper-sealed contributions (by contribution id,
    as `ledger.releases.releases_collect` returned them), then evaluate the task if every sealed
    report is opened or void for good (`_keys_settled`). True when this call evaluated it.

    The collecting is the caller's, outside any transaction: a keyper's answer may take seconds,
    and no row lock waits on the network. Exactly once like `task_evaluate`: the task's row lock,
    under which its contributions' releases are also written, and the "still working" guard.
    """
    if _evaluations_held():
        return False
    with transaction.atomic():
        task = _task_locked(task_id)
        if task is None or task.status != TaskStatus.WORKING or not task.keys_pending:
            return False
        contributions = list(task.contributions.order_by("seq"))
        grown = [
            contribution
            for contribution in contributions
            if _releases_kept(contribution, collected.get(contribution.id, ()))
        ]
        statements.write_all(*statements.updated_many(grown, ["releases"]))
        now = now_ms()
        if now < releases_from(task) or not _keys_settled(task, contributions, at=now):
            return False
        _evaluation_write(task, contributions, evaluated_at=now)
    return True


def _releases_kept(contribution: Contribution, collected: Sequence[dict[str, Any]]) -> bool:
    """Add to the contribution's releases those collected from keypers it has none from; True when
    any was. Another worker's collection may have kept some already: none is kept twice."""
    keypers = {release["keyper"] for release in contribution.releases}
    new = [release for release in collected if release["keyper"] not in keypers]
    contribution.releases = [*contribution.releases, *new]
    return bool(new)


def task_evaluated_if_due(task: Task) -> Task:
    """The task, evaluated first when its deadline has passed: what a door calls before it shows
    one task, so none shows a task open past its deadline (SPEC §4.3). Lists call
    `tasks_evaluate_due` instead. A task whose keys are pending stays open until the worker has
    its keypers' releases (SPEC §15.8): a read never waits on a keyper."""
    if DUE.holds(task, timezone.now()):
        task_evaluate(task_id=task.pk)
        task.refresh_from_db()
    return task


def _status_changes(batch: list[Task]) -> dict[str, int]:
    """What a batch of evaluations does to the counts: every task leaves WORKING for its new status."""
    changes = Counter(task.status for task in batch)
    changes[TaskStatus.WORKING] -= len(batch)
    return changes


# What the sweep does not read of a task: what the evaluation sets before anything reads it, and
# what neither the view, the log entry nor a read model shows. Each column read is a value
# converted and set on each task; a field read after all would cost a query a task, which
# `test_the_sweeps_reads_do_not_grow_with_its_batch` would see.
_SET_BY_THE_EVALUATION = (
    *EVALUATION_FIELDS,
    "poster",
)
_SWEEP_READS = tuple(
    field.name for field in Task._meta.concrete_fields if field.name not in _SET_BY_THE_EVALUATION
)
# What the sweep reads of its batch's contributions: rows of the fields an evaluation reads
# (`Counted`), not model objects, whose construction costs more than the read itself.
_CONTRIBUTION_FIELDS_READ = (
    "id",
    "task_id",
    "sealed_report",
    "report_digest",
    "salt",
    "received_at",
    "keyper_seal",
    "releases",
)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off while a batch is evaluated and freed. A batch makes tens of
    thousands of objects (rows, views, forms), so the collector would run again and again over
    Django's long-lived ones, a real share of the worker's work a task. A batch's
    objects hold no cycles of their own, and are freed by their counts before the collector is
    back: its first pass then finds the few that outlived the batch, not every one it made.
    The switch is the whole process's: a web process whose read sweeps a batch leaves its other
    threads' cycles for after it, and of two batches at once in one process, whichever found the
    collector on turns it back on."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _batch_evaluate(batch_size: int) -> int:
    """Evaluate up to `batch_size` due tasks in one transaction; returns how many."""
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
        contributions: dict[uuid.UUID, list[Counted]] = defaultdict(list)
        for contribution in (
            Contribution.objects.filter(task_id__in=[task.pk for task in batch])
            .order_by("seq")
            .values_list(*_CONTRIBUTION_FIELDS_READ, named=True)
        ):
            contributions[contribution.task_id].append(contribution)
        changes = [
            evaluation_apply(task, contributions[task.pk], evaluated_at=now_ms()) for task in batch
        ]
        statements.write_all(
            *statements.updated_many(batch, EVALUATION_FIELDS), *task_changed(changes).writes
        )
        task_count_change(_status_changes(batch))
        log_queue(evaluation_entry(task) for task in batch)
        if batch:
            transaction.on_commit(sequencing_nudge)
    return len(batch)


# Tasks a sweep's transaction evaluates. Each commit waits for its WAL to reach the disk, so a
# much smaller batch spends a noticeable share of the sweep waiting on commits, and a much larger
# one costs the database more CPU a task than the fewer commits save.
BATCH_SIZE = 1000


def tasks_evaluate_due(*, batch_size: int = BATCH_SIZE) -> int:
    """Evaluate every task past its deadline but those whose keys are pending (the worker's, in
    `tasks.keyper_sweep`), a batch per transaction; returns how many this call did.

    Rows another evaluator holds are skipped, not waited for: that evaluator is doing them. Every
    list read calls this first and almost always finds nothing due, so one probe outside any
    transaction (`DUE.any_sql`) answers that case.
    """
    if not DUE.any_now() or _evaluations_held():
        return 0
    evaluated = 0
    while True:
        with _collector_paused():
            done = _batch_evaluate(batch_size)
        evaluated += done
        if done < batch_size:
            return evaluated
