"""SPEC §15.8 under real concurrency (PostgreSQL): two workers' sweeps over the same tasks whose
keys are pending evaluate each exactly once, with the keypers' releases each sweep finds."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from ledger.entry_types import EVALUATION
from ledger.models import Leaf, QueuedEntry
from tasks.counts import task_count
from tasks.jobs import evaluate_due
from tasks.models import Task
from tests.conftest import postgres_only
from tests.core.test_concurrency import race
from tests.factories import contribution_report
from tests.ledger.sealed_to_keypers import (
    keypers_held,
    releases_keep,
    sealed_contribute,
    sealed_payload,
)

pytestmark = [postgres_only(), pytest.mark.django_db(transaction=True)]


def test_two_sweeps_racing_over_tasks_awaiting_keys_evaluate_each_once(
    make_agent, post_task, raised_caps, settings, time_machine
):
    # Given six tasks with two sealed reports each, every report with its two releases, and one
    # task whose second report has one release only
    keypers = keypers_held(3)
    settings.CAIRN_KEYPERS = [
        {"name": k.listed.name, "hpke_key": k.listed.hpke_key, "url": k.listed.url} for k in keypers
    ]
    settings.CAIRN_KEYPER_THRESHOLD = 2
    poster = make_agent()
    tasks = [post_task(poster) for _ in range(7)]
    for n, task in enumerate(tasks):
        for second in (False, True):
            payload = sealed_payload(task, contribution_report(), keypers)
            contribution = sealed_contribute(make_agent().agent, task, payload)
            released = keypers[:1] if n == 6 and second else keypers[:2]
            releases_keep(contribution, released, released_at=task.deadline)
    time_machine.move_to(max(task.deadline for task in tasks) + timedelta(seconds=61), tick=True)

    # When two workers sweep at the same instant
    results = race(2, lambda i: evaluate_due())

    # Then the six are evaluated once each, between them, and the seventh still waits
    assert sorted(results) in ([0, 6], [1, 5], [2, 4], [3, 3])
    assert task_count(["working"]) == 1 and task_count(["completed"]) == 6
    waiting = Task.objects.get(status="working")
    assert waiting.pk == tasks[6].pk and waiting.keys_pending
    texts = [*Leaf.objects.values_list("entry", flat=True)]
    texts += QueuedEntry.objects.values_list("entry", flat=True)
    evaluated = [json.loads(t)["task_id"] for t in texts if json.loads(t)["type"] == EVALUATION]
    assert sorted(evaluated) == sorted(str(task.pk) for task in tasks[:6])
    assert race(2, lambda i: evaluate_due()) == [0, 0]
