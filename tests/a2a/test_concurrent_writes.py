"""A2A writes do not queue behind one another: a contribution that waits on its task's row (the
worker evaluating it, the keeper's admin) leaves every other agent's write answered meanwhile."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
from django.db import connection, transaction

from tasks.models import Contribution, Task
from tests.a2a.conftest import message, result_of
from tests.conftest import postgres_only
from tests.factories import contribution_payload


def _contribute(live_url: str, token: str, task: Task) -> httpx.Response:
    envelope = {
        "jsonrpc": "2.0",
        "id": str(uuid.uuid4()),
        "method": "SendMessage",
        "params": {"message": message(contribution_payload(), task_id=str(task.pk))},
    }
    headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
    return httpx.post(f"{live_url}/api/a2a", json=envelope, headers=headers, timeout=15)


def _backends_waiting_on_a_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        (waiting,) = cursor.fetchone()
    return waiting


@postgres_only()
def test_a_contribution_waiting_on_its_task_holds_up_no_other_write(
    live_url, poster, make_agent, post_task
):
    held, free = post_task(poster), post_task(poster)
    first, second = make_agent(), make_agent()

    with ThreadPoolExecutor(max_workers=1) as pool:
        with transaction.atomic():
            Task.objects.select_for_update().get(pk=held.pk)
            waiting = pool.submit(_contribute, live_url, first.token, held)
            for _ in range(200):
                if _backends_waiting_on_a_lock():
                    break
                time.sleep(0.05)
            assert _backends_waiting_on_a_lock() == 1, "the first contribution never met the lock"

            answered = result_of(_contribute(live_url, second.token, free))["task"]

            assert answered["id"] == str(free.pk)
            assert not waiting.done()
        kept = result_of(waiting.result())["task"]

    assert kept["id"] == str(held.pk)
    assert Contribution.objects.filter(task__in=[held, free]).count() == 2
