"""Caps, uniqueness, replays and evaluation under real concurrent transactions (PostgreSQL)."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from a2a_gateway.models import TaskForm
from agents.models import Door, Operation
from agents.services import Caller
from core.errors import Refusal
from tasks.counts import task_count
from tasks.evaluation import task_evaluate, tasks_evaluate_due
from tasks.models import Contribution, Task
from tasks.services import contribution_submit, task_post
from tests.conftest import postgres_only
from tests.factories import contribution_payload, open_task_payload

pytestmark = [postgres_only(), pytest.mark.django_db(transaction=True)]


def race(count: int, work: Callable[[int], Any]) -> list[Any]:
    """Run `work(i)` in `count` threads released at the same instant; return results or exceptions."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def run(i: int) -> None:
        try:
            barrier.wait()
            results[i] = work(i)
        except Exception as exc:  # the outcome of each racer is what the test asserts
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_twelve_contributors_racing_for_three_places(make_agent, post_task):
    task = post_task(make_agent(), open_task_payload())
    contributors = [make_agent() for _ in range(12)]

    results = race(
        12,
        lambda i: contribution_submit(
            Caller(contributors[i].agent, str(uuid.uuid4()), Door.A2A),
            task_id=task.pk,
            payload=contribution_payload(),
        ),
    )

    refusals = [r for r in results if isinstance(r, Refusal)]
    assert len(refusals) == 9 and {r.code for r in refusals} == {"task_full"}
    assert Contribution.objects.filter(task=task).count() == 3
    stored = Task.objects.get(pk=task.pk)
    assert stored.contributions_count == 3
    # Each contribution rewrote the forms from what it read under the task's lock: none was lost.
    form = TaskForm.objects.get(task=task)
    assert json.loads(stored.view_json)["contributions_received"] == 3
    assert json.loads(form.task_json)["metadata"]["cairn"]["contributions_received"] == 3
    assert json.loads(form.list_item_json)["metadata"]["cairn"]["contributions_received"] == 3


def test_one_agent_posting_six_tasks_at_once_gets_two(make_agent):
    poster = make_agent()
    results = race(
        6,
        lambda i: task_post(
            Caller(poster.agent, str(uuid.uuid4()), Door.HTTP), payload=open_task_payload()
        ),
    )
    assert sum(not isinstance(r, Exception) for r in results) == 2
    assert {r.code for r in results if isinstance(r, Refusal)} == {"daily_cap"}
    assert Task.objects.filter(poster=poster.agent).count() == 2
    assert task_count(["working"]) == 2


def test_one_operation_sent_eight_times_at_once_writes_once(make_agent):
    poster = make_agent()
    payload = open_task_payload()
    results = race(
        8,
        lambda i: task_post(Caller(poster.agent, "same-op", Door.HTTP), payload=payload),
    )
    assert not [r for r in results if isinstance(r, Exception)]
    assert [r.replayed for r in results].count(False) == 1
    assert len({r.body["task"]["id"] for r in results}) == 1
    assert Task.objects.count() == 1 and Operation.objects.count() == 1


def test_the_same_contribution_sent_eight_times_at_once_is_sealed_once(make_agent, post_task):
    task = post_task(make_agent(), open_task_payload())
    contributor = make_agent()
    payload = contribution_payload()
    results = race(
        8,
        lambda i: contribution_submit(
            Caller(contributor.agent, "same-message", Door.A2A), task_id=task.pk, payload=payload
        ),
    )
    assert not [r for r in results if isinstance(r, Exception)]
    assert len({r.body["receipt"]["contribution_id"] for r in results}) == 1
    assert Contribution.objects.count() == 1


def test_four_evaluators_on_one_overdue_task_evaluate_once(
    make_agent, post_task, contribute, time_machine
):
    task = post_task(make_agent(), open_task_payload())
    contribute(make_agent(), task)
    contribute(make_agent(), task)
    time_machine.move_to(task.deadline, tick=True)

    results = race(4, lambda i: task_evaluate(task_id=task.pk))

    assert sorted(results) == [False, False, False, True]
    assert Task.objects.get(pk=task.pk).outcome == "resolved"
    assert (task_count(["working"]), task_count(["completed"])) == (0, 1)


def test_two_sweeps_racing_over_many_overdue_tasks_evaluate_each_once(
    make_agent, post_task, raised_caps, time_machine
):
    poster = make_agent()
    tasks = [post_task(poster, open_task_payload()) for _ in range(60)]
    time_machine.move_to(max(task.deadline for task in tasks), tick=True)

    results = race(2, lambda i: tasks_evaluate_due(batch_size=7))

    assert sum(results) == 60
    assert not Task.objects.filter(status="working").exists()
    assert (task_count(["working"]), task_count(["failed"])) == (0, 60)
