"""Writes on tasks. Every door calls these; no door checks a rule of its own (SPEC §6 order)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction

from agents.models import Agent, Door
from agents.services import WriteResult
from agents.writes import Performed, agent_write
from core import privacy, statements
from core.canonical import canonical_digest
from core.clock import now_ms, parse_instant
from core.errors import ErrorCode, Issue, Refusal, refuse_if
from core.metrics import counted_write
from core.payloads import parse_payload
from ledger.entries import contribution_entry, salt_new, task_entry
from ledger.jobs import sequencing_nudge
from ledger.receipts import receipt_sign
from ledger.seal import report_seal
from ledger.services import log_writes
from tasks.changes import TaskChange, task_changed
from tasks.counts import task_count_change
from tasks.evaluation import task_evaluated_if_due
from tasks.jobs import schedule_evaluation
from tasks.models import Contribution, Task, TaskStatus
from tasks.payloads import (
    CONTRIBUTION_SCHEMA,
    OPEN_TASK_SCHEMA,
    ContributionPayload,
    OpenTaskPayload,
)
from tasks.rendered import RENDERED_FIELDS, task_render
from tasks.rules import (
    contribution_approval_issues,
    contribution_texts,
    deadline_issues,
    open_task_approval_issues,
    open_task_texts,
    source_in_task_issues,
    source_issues,
)
from tasks.selectors import (
    ContributorRecord,
    receipt_claims,
    receipt_view,
    task_get_for_write,
    task_lock_for_contribution,
)

TASK_POST = "task_post"
CONTRIBUTION_SUBMIT = "contribution_submit"
DAY = timedelta(hours=24)


def _posting_cap_issues(agent: Agent) -> list[Issue]:
    now = now_ms()
    issues = []
    posted_today = Task.objects.filter(poster=agent, created_at__gt=now - DAY).count()
    if posted_today >= settings.CAIRN_TASKS_PER_AGENT_PER_DAY:
        issues.append(
            Issue(
                "",
                ErrorCode.DAILY_CAP,
                f"at most {settings.CAIRN_TASKS_PER_AGENT_PER_DAY} tasks per agent in any 24 hours",
            )
        )
    open_now = Task.objects.filter(
        poster=agent, status=TaskStatus.WORKING, deadline__gt=now
    ).count()
    if open_now >= settings.CAIRN_OPEN_TASKS_PER_AGENT:
        issues.append(
            Issue(
                "",
                ErrorCode.OPEN_TASK_CAP,
                f"at most {settings.CAIRN_OPEN_TASKS_PER_AGENT} open tasks per agent at once",
            )
        )
    return issues


@counted_write("task")
def task_post(
    *, agent: Agent, payload: Any, operation_id: str, door: Door, client: str = ""
) -> WriteResult:
    """Post a source-review task (`cairn.open_task/0.1`) and schedule its evaluation."""

    def check() -> OpenTaskPayload:
        parsed = parse_payload(OpenTaskPayload, payload, schema=OPEN_TASK_SCHEMA)
        refuse_if(open_task_approval_issues(parsed))
        refuse_if(source_issues(parsed.request.sources))
        refuse_if(deadline_issues(parsed.request.deadline, now=now_ms()))
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
        return Performed(
            {"task": view},
            object_type="task",
            object_id=str(task.id),
            writes=(
                statements.object_inserted(task),
                *task_changed([TaskChange(task, view)]),
                *log_writes([task_entry(task)]),
            ),
        )

    return agent_write(
        agent=agent,
        operation_id=operation_id,
        kind=TASK_POST,
        request=payload,
        door=door,
        client=client,
        check=check,
        perform=perform,
    )


def _contribution_state_issues(agent: Agent, task: Task, mine: ContributorRecord) -> list[Issue]:
    """Call with what was read under the agent's and the task's row locks, so nothing moved since."""
    issues = []
    if task.poster_id == agent.pk:
        issues.append(Issue("", ErrorCode.OWN_TASK, "an agent cannot contribute to its own task"))
    if mine.to_task:
        issues.append(
            Issue(
                "", ErrorCode.DUPLICATE_CONTRIBUTION, "this agent already contributed to this task"
            )
        )
    if task.contributions_count >= task.max_contributors:
        issues.append(
            Issue(
                "",
                ErrorCode.TASK_FULL,
                f"the task takes at most {task.max_contributors} contributions",
            )
        )
    if mine.since >= settings.CAIRN_CONTRIBUTIONS_PER_AGENT_PER_DAY:
        issues.append(
            Issue(
                "",
                ErrorCode.DAILY_CAP,
                f"at most {settings.CAIRN_CONTRIBUTIONS_PER_AGENT_PER_DAY} contributions per agent in any 24 hours",
            )
        )
    return issues


def _refuse_if_closed(task: Task) -> None:
    if task.status != TaskStatus.WORKING or task.deadline <= now_ms():
        raise Refusal(
            ErrorCode.TASK_CLOSED, "the task is past its deadline and takes no more contributions"
        )


@counted_write("contribution")
def contribution_submit(
    *, agent: Agent, task_id: Any, payload: Any, operation_id: str, door: Door, client: str = ""
) -> WriteResult:
    """Seal a contribution (`cairn.task.contribution/0.1`) to an open task and answer with a receipt."""

    def check() -> tuple[Task, dict[str, Any]]:
        task = task_evaluated_if_due(task_get_for_write(task_id))
        parsed = parse_payload(ContributionPayload, payload, schema=CONTRIBUTION_SCHEMA)
        _refuse_if_closed(task)
        report = {key: value for key, value in payload.items() if key != "approval"}
        refuse_if(contribution_approval_issues(parsed, report))
        refuse_if(source_in_task_issues(parsed.source_urls, task.sources))
        refuse_if(privacy.screen(contribution_texts(parsed)))
        return task, report

    def perform(agent: Agent, checked: tuple[Task, dict[str, Any]]) -> Performed:
        task, report = checked
        mine = task_lock_for_contribution(task, agent=agent, since=now_ms() - DAY)
        _refuse_if_closed(task)
        refuse_if(_contribution_state_issues(agent, task, mine))
        contribution = Contribution(
            task=task,
            agent=agent,
            operation_id=operation_id,
            report_digest=canonical_digest(report),
            salt=salt_new(),
            received_at=now_ms(),
        )
        contribution.sealed_report = report_seal(
            report, task_id=task.id, contribution_id=contribution.id
        )
        contribution.receipt_signature = receipt_sign(receipt_claims(contribution))
        task.contributions_count += 1
        view = task_render(task)
        transaction.on_commit(sequencing_nudge)
        body = {"task": view, "receipt": receipt_view(contribution)}
        writes = (
            statements.object_inserted(contribution),
            *log_writes([contribution_entry(contribution)]),
            statements.updated(task, ["contributions_count", *RENDERED_FIELDS]),
            *task_changed([TaskChange(task, view)]),
        )
        return Performed(
            body, object_type="contribution", object_id=str(contribution.id), writes=writes
        )

    return agent_write(
        agent=agent,
        operation_id=operation_id,
        kind=CONTRIBUTION_SUBMIT,
        request={"task_id": str(task_id), "payload": payload},
        door=door,
        client=client,
        check=check,
        perform=perform,
    )
