"""SPEC §4.3: the fixed rule, its boundaries, exactly once, and no door ever showing an overdue task open."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.canonical import canonical_digest
from core.errors import Refusal
from tasks.counts import task_count
from tasks.evaluation import decide, task_evaluate, task_evaluated_if_due, tasks_evaluate_due
from tasks.models import Outcome, Task, TaskStatus
from tasks.rendered import task_view
from tasks.sealing import contribution_report as contribution_report_of
from tasks.selectors import task_get, task_page
from tests.factories import (
    contribution_payload,
    contribution_report,
    deadline_in,
    open_task_payload,
    open_task_request,
)


@pytest.mark.parametrize(
    "verdicts, min_independent, expected",
    [
        ([], 2, (Outcome.UNRESOLVED, None)),
        (["source_supported"], 2, (Outcome.UNRESOLVED, None)),
        (["source_supported", "source_supported"], 3, (Outcome.UNRESOLVED, None)),
        (["source_supported", "source_supported"], 2, (Outcome.RESOLVED, "source_supported")),
        (["source_unclear"] * 5, 5, (Outcome.RESOLVED, "source_unclear")),
        (["source_supported", "source_contradicted"], 2, (Outcome.CONTESTED, None)),
        (["source_supported", "source_supported", "source_unclear"], 2, (Outcome.CONTESTED, None)),
        (["source_contradicted", "source_supported"], 3, (Outcome.UNRESOLVED, None)),
    ],
)
def test_the_rule_table(verdicts, min_independent, expected):
    assert decide(verdicts, min_independent) == expected


@pytest.fixture
def task(poster, post_task):
    return post_task(
        poster, open_task_payload(open_task_request(min_independent=2, max_contributors=3))
    )


def send(contribute, make_agent, task, verdicts):
    reports = []
    for verdict in verdicts:
        report = contribution_report(verdict=verdict)
        contribute(make_agent(), task, contribution_payload(report))
        reports.append(report)
    return reports


def test_agreeing_reports_resolve_and_everything_is_published(
    task, contribute, make_agent, time_machine
):
    reports = send(contribute, make_agent, task, ["source_supported", "source_supported"])
    time_machine.move_to(task.deadline, tick=True)

    view = task_view(task_evaluated_if_due(task_get(task.pk)))

    assert (view["state"], view["outcome"], view["verdict"]) == (
        "evaluated",
        "resolved",
        "source_supported",
    )
    evaluation = view["evaluation"]
    assert (
        evaluation["schema"] == "cairn.evaluation/0.1" and evaluation["rule"] == "cairn.rules/0.1"
    )
    assert evaluation["counts"] == {
        "source_supported": 2,
        "source_contradicted": 0,
        "source_unclear": 0,
    }
    assert evaluation["min_independent"] == 2
    assert evaluation["evaluated_at"] == view["evaluated_at"]
    assert [item["report"] for item in evaluation["contributions"]] == reports
    for item in evaluation["contributions"]:
        assert item["report_digest"] == canonical_digest(item["report"])


def test_differing_reports_are_contested(task, contribute, make_agent, time_machine):
    send(contribute, make_agent, task, ["source_supported", "source_unclear"])
    time_machine.move_to(task.deadline, tick=True)
    task = task_evaluated_if_due(task_get(task.pk))
    assert (task.status, task.outcome, task.verdict) == ("completed", "contested", "")
    assert task_view(task)["verdict"] is None


def test_too_few_reports_are_unresolved(task, contribute, make_agent, time_machine):
    send(contribute, make_agent, task, ["source_supported"])
    time_machine.move_to(task.deadline, tick=True)
    task = task_evaluated_if_due(task_get(task.pk))
    assert (task.status, task.outcome) == ("failed", "unresolved")
    assert len(task.evaluation["contributions"]) == 1


def test_contributions_are_listed_in_the_order_received(task, contribute, make_agent, time_machine):
    receipts = [
        contribute(make_agent(), task, contribution_payload(contribution_report(verdict=v)))[
            "receipt"
        ]
        for v in ["source_unclear", "source_supported", "source_contradicted"]
    ]
    time_machine.move_to(task.deadline, tick=True)
    listed = task_evaluated_if_due(task_get(task.pk)).evaluation["contributions"]
    assert [item["contribution_id"] for item in listed] == [r["contribution_id"] for r in receipts]
    assert [item["received_at"] for item in listed] == [r["received_at"] for r in receipts]


def test_nothing_is_evaluated_before_the_deadline(task):
    assert task_evaluate(task_id=task.pk) is False
    assert tasks_evaluate_due() == 0
    assert task_evaluated_if_due(task_get(task.pk)).status == "working"


def test_evaluation_happens_once_and_never_changes(task, contribute, make_agent, time_machine):
    send(contribute, make_agent, task, ["source_supported", "source_supported"])
    time_machine.move_to(task.deadline, tick=True)
    assert task_evaluate(task_id=task.pk) is True
    first = Task.objects.get(pk=task.pk).evaluation

    time_machine.move_to(task.deadline.replace(year=task.deadline.year + 1), tick=True)
    assert task_evaluate(task_id=task.pk) is False
    assert tasks_evaluate_due() == 0
    assert Task.objects.get(pk=task.pk).evaluation == first


def test_status_timestamp_is_creation_then_evaluation(task, time_machine):
    assert task.status_timestamp == task.created_at
    time_machine.move_to(task.deadline, tick=True)
    task = task_evaluated_if_due(task_get(task.pk))
    assert task.status_timestamp == task.evaluated_at >= task.deadline


def test_a_list_never_shows_an_overdue_task_open(task, time_machine):
    """Selectors only read; every door has the domain evaluate what is due before it lists."""
    time_machine.move_to(task.deadline, tick=True)
    assert task_page(statuses=None, limit=50, cursor=None, filter_key="t").tasks == [task]
    assert Task.objects.get(pk=task.pk).status == "working", "a read wrote nothing"

    tasks_evaluate_due()
    page = task_page(statuses=frozenset({"working"}), limit=50, cursor=None, filter_key="t")
    assert page.tasks == [] and page.total == 0
    assert Task.objects.get(pk=task.pk).status == "failed"


def test_the_sweep_evaluates_every_overdue_task(
    poster, post_task, make_agent, settings, time_machine
):
    settings.CAIRN_TASKS_PER_AGENT_PER_DAY = settings.CAIRN_OPEN_TASKS_PER_AGENT = 5
    tasks = [post_task(poster) for _ in range(3)]
    time_machine.move_to(max(t.deadline for t in tasks), tick=True)
    assert tasks_evaluate_due() == 3
    assert set(Task.objects.values_list("status", flat=True)) == {"failed"}


def test_the_sweep_reveals_every_report_as_written_and_stores_the_view_a_read_renders(
    poster, post_task, contribute, make_agent, raised_caps, time_machine
):
    """Several tasks in one batch: the batch's statements carry JSON texts full of quotes,
    backslashes and non-ASCII, and each row gets its own."""
    tasks = [post_task(poster) for _ in range(3)]
    written = {}
    for index, task in enumerate(tasks):
        for turn in range(index + 1):
            summary = f'"Quoted" \\ back\\slash, café №{index}.{turn} — {{"not": "json"}}'
            report = contribution_report(summary=summary)
            contribute(make_agent(), task, contribution_payload(report))
            written.setdefault(task.pk, []).append(report)
    time_machine.move_to(max(t.deadline for t in tasks), tick=True)

    assert tasks_evaluate_due() == 3
    for task in tasks:
        stored = Task.objects.get(pk=task.pk)
        contributions = stored.contributions.select_related("task").order_by("seq")
        assert [contribution_report_of(c) for c in contributions] == written[task.pk]
        assert [c["report"] for c in stored.evaluation["contributions"]] == written[task.pk]
        assert json.loads(stored.view_json) == task_view(stored)


def test_the_sweeps_reads_do_not_grow_with_its_batch(
    poster, post_task, contribute, make_agent, raised_caps, time_machine
):
    """The sweep reads a batch of tasks and their contributions in two statements, whatever its
    size: a field it left unread but touched would cost a statement a task, and a batch of
    thousands would take thousands of round trips."""
    reads = []
    for size in (2, 6):
        tasks = [post_task(poster) for _ in range(size)]
        for index, task in enumerate(tasks):
            for _ in range(1 + index % 2):
                contribute(make_agent(), task)
        time_machine.move_to(max(t.deadline for t in tasks), tick=True)
        with CaptureQueriesContext(connection) as queries:
            assert tasks_evaluate_due() == size
        reads.append([q["sql"] for q in queries if q["sql"].startswith("SELECT")])
    assert len(reads[0]) == len(reads[1]) == 3  # is anything due; the tasks; their contributions


def counts_by_status() -> dict[str, tuple[int, int]]:
    """Per status: (the kept count, a count of the rows)."""
    return {
        status: (task_count([status]), Task.objects.filter(status=status).count())
        for status in TaskStatus.values
    }


def test_the_kept_counts_follow_every_post_and_evaluation(
    poster, post_task, contribute, make_agent, raised_caps, time_machine
):
    early = [post_task(poster, open_task_payload(open_task_request(deadline=deadline_in(1900))))]
    for agent in (make_agent(), make_agent()):
        contribute(agent, early[0], contribution_payload(contribution_report()))
    early += [post_task(poster, open_task_payload(open_task_request(deadline=deadline_in(1900))))]
    later = [post_task(poster) for _ in range(4)]
    assert counts_by_status()["working"] == (6, 6)

    time_machine.move_to(max(t.deadline for t in early), tick=True)
    task_evaluated_if_due(task_get(early[0].pk))  # a door's read: resolved
    task_evaluated_if_due(task_get(early[1].pk))  # unresolved
    assert counts_by_status() == {"working": (4, 4), "completed": (1, 1), "failed": (1, 1)}

    time_machine.move_to(max(t.deadline for t in later), tick=True)
    assert tasks_evaluate_due(batch_size=3) == 4
    assert counts_by_status() == {"working": (0, 0), "completed": (1, 1), "failed": (5, 5)}
    page = task_page(statuses=None, limit=2, cursor=None, filter_key="t")
    assert page.total == 6
    evaluated = task_page(
        statuses=frozenset({"completed", "failed"}), limit=2, cursor=None, filter_key="e"
    )
    assert evaluated.total == 6


def test_a_refused_post_changes_no_count(poster, post_task, settings):
    settings.CAIRN_TASKS_PER_AGENT_PER_DAY = 1
    post_task(poster)
    with pytest.raises(Refusal):
        post_task(poster)
    assert counts_by_status()["working"] == (1, 1)
