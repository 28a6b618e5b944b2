"""Writes on tasks. Every door calls these; no door checks a rule of its own (SPEC §6 order)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction

from agents.models import Agent
from agents.services import Caller, WriteResult
from agents.writes import DAY, Performed, agent_write, daily_cap_issue
from core import privacy, statements
from core.canonical import canonical_digest
from core.clock import now_ms, parse_instant
from core.errors import ErrorCode, Issue, Refusal, refuse_if
from core.metrics import counted_write
from core.payloads import parse_payload
from core.wire_names import CONTRIBUTION_SCHEMA
from ledger.entry_types import task_entry
from ledger.jobs import sequencing_nudge
from ledger.keyper_seal import SEALED_SCHEMA, b64u_decode, ciphertext_digest, salt_new
from ledger.keys import receipt_sign
from ledger.seal import report_seal
from ledger.services import contribution_entry, log_writes
from ledger.witnesses import keypers_configured
from tasks.changes import TaskChange, task_changed
from tasks.counts import task_count_change
from tasks.evaluation import task_evaluated_if_due
from tasks.jobs import schedule_evaluation
from tasks.models import Contribution, Task, TaskStatus
from tasks.payloads import ContributionPayload, OpenTaskPayload, SealedContributionPayload
from tasks.rendered import RENDERED_FIELDS, task_render
from tasks.rules import (
    approval_issues,
    deadline_issues,
    keyper_envelope_issues,
    open_task_texts,
    report_refuse_if_broken,
    source_issues,
    task_entry_issues,
)
from tasks.selectors import receipt_claims, receipt_view, task_entry_logged, task_get_for_write

TASK_POST = "task_post"
CONTRIBUTION_SUBMIT = "contribution_submit"


def _posting_cap_issues(agent: Agent) -> list[Issue]:
    now = now_ms()
    issues = []
    posted_today = Task.objects.filter(poster=agent, created_at__gt=now - DAY).count()
    if posted_today >= settings.CAIRN_TASKS_PER_AGENT_PER_DAY:
        issues.append(daily_cap_issue(settings.CAIRN_TASKS_PER_AGENT_PER_DAY, "tasks"))
    open_now = Task.objects.filter(poster=agent, status=TaskStatus.WORKING, deadline__gt=now)
    if open_now.count() >= settings.CAIRN_OPEN_TASKS_PER_AGENT:
        message = f"at most {settings.CAIRN_OPEN_TASKS_PER_AGENT} open tasks per agent at once"
        issues.append(Issue("", ErrorCode.OPEN_TASK_CAP, message))
    return issues


@counted_write("task")
def task_post(caller: Caller, *, payload: Any) -> WriteResult:
    """Post a source-review task (`cairn.open_task/0.1`) and schedule its evaluation."""

    def check() -> OpenTaskPayload:
        parsed = parse_payload(OpenTaskPayload, payload)
        refuse_if(approval_issues(parsed.approval, canonical_digest(parsed.request.model_dump())))
        refuse_if(source_issues(parsed.request.sources))
        refuse_if(deadline_issues(parsed.request.deadline))
        refuse_if(privacy.screen(open_task_texts(parsed)))
        return parsed

    def perform(agent: Agent, parsed: OpenTaskPayload) -> Performed:
        refuse_if(_posting_cap_issues(agent))
        request = parsed.request
        created_at = now_ms()
        task = Task(
            poster=agent,
            title=request.title,
            question=request.question,
            sources=request.sources,
            acceptance_criteria=request.acceptance_criteria,
            deadline_text=request.deadline,
            deadline=parse_instant(request.deadline),
            min_independent=request.min_independent,
            max_contributors=request.max_contributors,
            budget=request.budget.model_dump(),
            public_input_digest=parsed.approval.public_input_digest,
            created_at=created_at,
            status_timestamp=created_at,
        )
        view = task_render(task)
        task_count_change({TaskStatus.WORKING: 1})
        transaction.on_commit(sequencing_nudge)
        transaction.on_commit(lambda: schedule_evaluation(task_id=task.id, deadline=task.deadline))
        read_models = task_changed([TaskChange(task, view)])
        return Performed(
            {"task": view},
            object_type="task",
            object_id=str(task.id),
            writes=(
                statements.object_inserted(task),
                *read_models.writes,
                *log_writes([task_entry(view)]),
            ),
            form=next(iter(read_models.forms), None),
        )

    return agent_write(caller, TASK_POST, payload, check=check, perform=perform)


def _task_lock_for_contribution(task: Task, *, agent: Agent, since: datetime) -> tuple[int, int]:
    """Lock the task's row, refresh `task` from it, and count the agent's contributions to it and
    since `since`, in one statement; call holding the agent's row lock, so the counts are exact."""
    by_agent = statements.db_value(Contribution, "agent", agent.pk)
    received_since = statements.db_value(Contribution, "received_at", since)
    task_key = statements.db_value(Task, "id", task.pk)
    row = statements.fetch_one(
        _task_lock_for_contribution_sql(), [by_agent, by_agent, received_since, task_key]
    )
    assert row is not None, "tasks are never deleted"
    *fields, to_task, since_count = row
    values = statements.python_values(Task, _LOCKED_FIELDS, fields)
    for name, value in zip(_LOCKED_FIELDS, values, strict=True):
        setattr(task, name, value)
    return to_task, since_count


_LOCKED_FIELDS = ("status", "contributions_count", "keys_pending")


@statements.prepared
def _task_lock_for_contribution_sql() -> str:
    contributions = statements.table(Contribution)
    tasks = statements.table(Task)
    task_pk = f"{tasks}.{statements.column(Task, 'id')}"
    by_agent = f"{statements.column(Contribution, 'agent')} = %s"
    return (
        f"SELECT {statements.columns(Task, _LOCKED_FIELDS)}, "
        f"(SELECT COUNT(*) FROM {contributions} WHERE {by_agent} "
        f"AND {statements.column(Contribution, 'task')} = {task_pk}), "
        f"(SELECT COUNT(*) FROM {contributions} WHERE {by_agent} "
        f"AND {statements.column(Contribution, 'received_at')} > %s) "
        f"FROM {tasks} WHERE {task_pk} = %s" + statements.for_update()
    )


def _contribution_state_issues(
    agent: Agent, task: Task, *, to_task: int, today: int
) -> list[Issue]:
    """Call with what was read under the agent's and the task's row locks, so nothing moved since."""
    issues = []
    cap = settings.CAIRN_CONTRIBUTIONS_PER_AGENT_PER_DAY
    if task.poster_id == agent.pk:
        issues.append(Issue("", ErrorCode.OWN_TASK, "an agent cannot contribute to its own task"))
    if to_task:
        message = "this agent already contributed to this task"
        issues.append(Issue("", ErrorCode.DUPLICATE_CONTRIBUTION, message))
    if task.contributions_count >= task.max_contributors:
        message = f"the task takes at most {task.max_contributors} contributions"
        issues.append(Issue("", ErrorCode.TASK_FULL, message))
    if today >= cap:
        issues.append(daily_cap_issue(cap, "contributions"))
    return issues


def _refuse_if_closed(task: Task) -> None:
    if task.status != TaskStatus.WORKING or task.deadline <= now_ms():
        raise Refusal(
            ErrorCode.TASK_CLOSED, "the task is past its deadline and takes no more contributions"
        )


@dataclass(frozen=True)
class _Checked:
    """The task, and the report as sent (plain form) or the envelope to keep (keyper-sealed)."""

    task: Task
    report: dict[str, Any] | None = None
    keyper_seal: dict[str, Any] | None = None


def _plain_checked(task: Task, payload: Any) -> _Checked:
    also = (SEALED_SCHEMA,) if keypers_configured() else ()
    parsed = parse_payload(ContributionPayload, payload, also=also)
    _refuse_if_closed(task)
    report = {key: value for key, value in payload.items() if key != "approval"}
    refuse_if(approval_issues(parsed.approval, canonical_digest(report)))
    report_refuse_if_broken(parsed, task.sources)
    return _Checked(task, report=report)


def _keyper_sealed_checked(task: Task, payload: Any) -> _Checked:
    """What can be checked without the plaintext (SPEC §15.8), in §6's order; the report's own
    rules wait for the evaluation, which opens it once the keypers release its key."""
    keypers = keypers_configured()
    if not keypers:
        message = (
            f"this site lists no keypers, so it takes only the plain form {CONTRIBUTION_SCHEMA!r}"
        )
        raise Refusal(
            ErrorCode.UNKNOWN_SCHEMA, message, [Issue("schema", ErrorCode.UNKNOWN_SCHEMA, message)]
        )
    parsed = parse_payload(SealedContributionPayload, payload)
    logged = task_entry_logged(task.pk)
    refuse_if(
        keyper_envelope_issues(parsed, keypers)
        + task_entry_issues(parsed.task_entry, None if logged is None else logged.index)
    )
    _refuse_if_closed(task)
    refuse_if(approval_issues(parsed.approval, parsed.commitment))
    return _Checked(
        task,
        keyper_seal={
            "task_entry": parsed.task_entry,
            "commitment": parsed.commitment,
            "ciphertext": parsed.ciphertext,
            "ciphertext_digest": ciphertext_digest(b64u_decode(parsed.ciphertext)),
            "threshold": settings.CAIRN_KEYPER_THRESHOLD,
            "shares": [share.model_dump() for share in parsed.shares],
        },
    )


@counted_write("contribution")
def contribution_submit(caller: Caller, *, task_id: Any, payload: Any) -> WriteResult:
    """Seal a contribution to an open task and answer with a receipt. The plain form is sealed at
    rest by the server, the other by its contributor to the keypers; both meet the same checks."""

    def check() -> _Checked:
        task = task_evaluated_if_due(task_get_for_write(task_id))
        if isinstance(payload, dict) and payload.get("schema") == SEALED_SCHEMA:
            return _keyper_sealed_checked(task, payload)
        return _plain_checked(task, payload)

    def perform(agent: Agent, checked: _Checked) -> Performed:
        task = checked.task
        to_task, today = _task_lock_for_contribution(task, agent=agent, since=now_ms() - DAY)
        _refuse_if_closed(task)
        refuse_if(_contribution_state_issues(agent, task, to_task=to_task, today=today))
        contribution = Contribution(
            task=task, agent=agent, operation_id=caller.operation_id, received_at=now_ms()
        )
        changed = ["contributions_count"]
        if checked.report is not None:
            contribution.report_digest = canonical_digest(checked.report)
            contribution.salt = salt_new()
            contribution.sealed_report = report_seal(
                checked.report, task_id=task.id, contribution_id=contribution.id
            )
        else:
            contribution.keyper_seal = checked.keyper_seal
            # Only this form writes the flag, and only ever to true: a plain contribution's
            # write leaves it as a concurrent sealed one may have set it.
            task.keys_pending = True
            changed.append("keys_pending")
        contribution.receipt_signature = receipt_sign(receipt_claims(contribution))
        task.contributions_count += 1
        view = task_render(task)
        transaction.on_commit(sequencing_nudge)
        read_models = task_changed([TaskChange(task, view)])
        return Performed(
            {"task": view, "receipt": receipt_view(contribution)},
            object_type="contribution",
            object_id=str(contribution.id),
            writes=(
                statements.object_inserted(contribution),
                *log_writes([contribution_entry(contribution)]),
                statements.updated(task, [*changed, *RENDERED_FIELDS]),
                *read_models.writes,
            ),
            form=next(iter(read_models.forms), None),
        )

    request = {"task_id": str(task_id), "payload": payload}
    return agent_write(caller, CONTRIBUTION_SUBMIT, request, check=check, perform=perform)
