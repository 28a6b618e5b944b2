"""SPEC §15.3: a running django-q2 cluster integrates a write's log entry and signs a checkpoint,
with nobody calling the sequencer by hand."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.models import Checkpoint, Leaf
from tests.core.test_worker import _database_url
from tests.factories import open_task_payload

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db(transaction=True)
def test_a_running_worker_puts_a_new_task_under_a_signed_checkpoint(poster, post_task, settings):
    # An earlier test's write in this process may have nudged within the interval, which would
    # leave this write to the minute's schedule (which a flushed test database no longer holds).
    time.sleep(settings.CAIRN_LOG_INTERVAL_S)
    task = post_task(poster, open_task_payload())
    env = {**os.environ, "DATABASE_URL": _database_url(), "CAIRN_WORKERS": "1"}
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        give_up = time.monotonic() + 120  # a lost nudge waits for the minute's schedule
        while time.monotonic() < give_up:
            latest = Checkpoint.objects.order_by("-id").first()
            if latest is not None and latest.tree_size >= 1:
                break
            time.sleep(0.5)
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:  # stopping is not what this test is about
            worker.kill()
            worker.wait()

    assert latest is not None and latest.tree_size == 1
    assert str(task.id) in Leaf.objects.get(index=0).entry
