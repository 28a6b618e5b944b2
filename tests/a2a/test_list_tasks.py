"""SPEC §8.5: ListTasks walks every task exactly once, in order, however the pages fall."""

from __future__ import annotations

import math
import uuid
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from core.clock import format_instant
from tasks.models import Task, TaskStatus
from tests.a2a.conftest import error_of, result_of
from tests.factories import deadline_in, open_task_payload, open_task_request

OPEN, EVALUATED = 110, 10


@pytest.fixture
def many_tasks(raised_caps, poster, post_task) -> None:
    """120 tasks through the service, with the clock frozen so that many share a timestamp:
    40 a second apart, then 70 in groups of 7 on the same millisecond, and 10 posted long ago,
    whose deadlines have passed, so the first read evaluates them (all at nearly the same instant)."""
    base = timezone.now() - timedelta(minutes=10)
    with time_machine.travel(base - timedelta(hours=2), tick=False):
        for _ in range(EVALUATED):
            post_task(poster, open_task_payload(open_task_request(deadline=deadline_in(1800))))
    for index in range(OPEN):
        second = index if index < 40 else 40 + (index - 40) // 7
        with time_machine.travel(base + timedelta(seconds=second), tick=False):
            post_task(poster)


def expected_order(**filters) -> list[str]:
    tasks = Task.objects.filter(**filters)
    return [
        str(t.pk) for t in sorted(tasks, key=lambda t: (t.status_timestamp, t.pk), reverse=True)
    ]


def walk(rpc, page_size: int, **params) -> list[str]:
    """Every page of one filter. A page holds at most 50 tasks, however many are asked for, and
    says the size it used."""
    used = min(page_size, 50)
    seen, token, pages = [], "", 0
    while True:
        result = result_of(rpc("ListTasks", {**params, "pageSize": page_size, "pageToken": token}))
        pages += 1
        assert result["pageSize"] == used
        assert len(result["tasks"]) <= used
        seen += [task["id"] for task in result["tasks"]]
        token = result["nextPageToken"]
        if token == "":
            return seen
        assert len(result["tasks"]) == used
        assert pages <= 200, "the walk does not end"


def test_every_walk_sees_every_task_once_in_order(rpc, many_tasks):
    first = result_of(rpc("ListTasks", {}))  # evaluates the overdue tasks, as any read does
    assert first["totalSize"] == OPEN + EVALUATED and first["pageSize"] == 50
    shared = (
        Task.objects.filter(status=TaskStatus.WORKING).values("status_timestamp").distinct().count()
    )
    assert shared == 40 + math.ceil((OPEN - 40) / 7), "many tasks share a timestamp"

    for page_size in (1, 7, 50, 100):
        for status, expected in [
            (None, expected_order()),
            ("TASK_STATE_WORKING", expected_order(status=TaskStatus.WORKING)),
            ("TASK_STATE_FAILED", expected_order(status=TaskStatus.FAILED)),
        ]:
            seen = walk(rpc, page_size, **({"status": status} if status else {}))
            assert len(seen) == len(set(seen)), "no task twice"
            assert seen == expected, "no gaps, newest status first, ties by id descending"
    assert len(expected_order(status=TaskStatus.WORKING)) == OPEN
    assert len(expected_order(status=TaskStatus.FAILED)) == EVALUATED


def test_page_size_total_size_filters_and_artifacts(rpc, many_tasks):
    result_of(rpc("ListTasks", {}))
    working = result_of(rpc("ListTasks", {"status": "TASK_STATE_WORKING"}))
    completed = result_of(rpc("ListTasks", {"status": "TASK_STATE_COMPLETED"}))

    assert (working["pageSize"], len(working["tasks"]), working["totalSize"]) == (50, 50, OPEN)
    assert working["nextPageToken"] != ""
    assert completed == {"tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0}
    for asked in (51, 100):  # A2A allows up to 100; a page holds 50 and says so
        more = result_of(rpc("ListTasks", {"status": "TASK_STATE_WORKING", "pageSize": asked}))
        assert (more["pageSize"], more["totalSize"]) == (50, OPEN)
        assert [t["id"] for t in more["tasks"]] == [t["id"] for t in working["tasks"]]

    ordered = expected_order(status=TaskStatus.WORKING)
    pivot = Task.objects.get(pk=ordered[30])
    by_context = result_of(rpc("ListTasks", {"contextId": ordered[5]}))
    assert [t["id"] for t in by_context["tasks"]] == [ordered[5]] and by_context["totalSize"] == 1
    recent = walk(
        rpc,
        7,
        status="TASK_STATE_WORKING",
        statusTimestampAfter=format_instant(pivot.status_timestamp),
    )
    at_or_after = [
        pk for pk in ordered if Task.objects.get(pk=pk).status_timestamp >= pivot.status_timestamp
    ]
    assert recent == at_or_after and ordered[30] in recent
    nobody = result_of(rpc("ListTasks", {"contextId": "not-a-task"}))
    assert (nobody["tasks"], nobody["totalSize"], nobody["nextPageToken"]) == ([], 0, "")

    listed = result_of(rpc("ListTasks", {"status": "TASK_STATE_FAILED"}))
    with_artifacts = result_of(
        rpc("ListTasks", {"status": "TASK_STATE_FAILED", "includeArtifacts": True})
    )
    assert all("artifacts" not in task for task in listed["tasks"])
    assert len(with_artifacts["tasks"]) == EVALUATED
    assert all(
        [a["artifactId"] for a in task["artifacts"]] == ["evaluation"]
        for task in with_artifacts["tasks"]
    )


def test_a_token_works_only_with_its_own_filter_and_cannot_be_forged(rpc, many_tasks):
    token = result_of(rpc("ListTasks", {"status": "TASK_STATE_WORKING", "pageSize": 7}))[
        "nextPageToken"
    ]
    assert result_of(
        rpc("ListTasks", {"status": "TASK_STATE_WORKING", "pageSize": 3, "pageToken": token})
    )

    for other_filter in (
        {},
        {"status": "TASK_STATE_FAILED"},
        {"status": "TASK_STATE_WORKING", "contextId": str(Task.objects.first().pk)},
        {"status": "TASK_STATE_WORKING", "statusTimestampAfter": "2020-01-01T00:00:00Z"},
    ):
        error_of(rpc("ListTasks", {**other_filter, "pageToken": token}), -32602)

    flipped = token[:-3] + ("A" if token[-3] != "A" else "B") + token[-2:]
    for bad in (flipped, token + "x", "x" + token, "not-a-token", str(uuid.uuid4())):
        error_of(
            rpc("ListTasks", {"status": "TASK_STATE_WORKING", "pageSize": 7, "pageToken": bad}),
            -32602,
        )
