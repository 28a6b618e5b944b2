"""SPEC §4.3 scheduling: a running django-q2 cluster evaluates a task at its deadline with no read at all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from django.db import connection

from tasks.models import Task
from tests.factories import deadline_in, open_task_payload, open_task_request
from tests.workers import redis_url

ROOT = Path(__file__).resolve().parents[2]


def _database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("broker", ["orm", "redis"])
def test_a_running_worker_evaluates_a_task_at_its_deadline(poster, post_task, settings, broker):
    settings.CAIRN_TASK_DEADLINE_MIN_S = 1
    if broker == "redis":
        redis.Redis.from_url(redis_url()).flushdb()
    task = post_task(poster, open_task_payload(open_task_request(deadline=deadline_in(2))))
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "SECRET_KEY": "cairn-tests-only",
        "CAIRN_WORKERS": "1",
        **({"CAIRN_REDIS_URL": redis_url()} if broker == "redis" else {}),
    }
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        give_up = time.monotonic() + 120  # django-q2 looks at its schedules every 30 s
        while time.monotonic() < give_up:
            task.refresh_from_db()  # a plain row read: the selectors' evaluate-on-read is not involved
            if task.status != "working":
                break
            time.sleep(0.5)
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:  # stopping is not what this test is about
            worker.kill()
            worker.wait()

    assert (task.status, task.outcome) == ("failed", "unresolved")
    assert Task.objects.get(pk=task.pk).evaluation["outcome"] == "unresolved"
