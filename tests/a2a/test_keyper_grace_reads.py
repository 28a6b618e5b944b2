"""SPEC §4.3 and §15.8 on every door: a task awaiting its keypers is past its deadline but not due
(`tasks.due.DUE`), so however often it is read during its grace, no read evaluates it or takes
its row lock, and the worker's evaluation never waits on a reader. Every binding of the web
server (JSON-RPC 1.0 and 0.3, HTTP+JSON, the HTTP routes, the page; under ASGI and WSGI) and the
gRPC server's process read it, on PostgreSQL, whose row header says whether a lock was taken."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from a2a.types import GetTaskRequest, ListTasksRequest, TaskState, a2a_pb2_grpc
from django.db import connection, transaction

from tasks.evaluation import tasks_evaluate_due
from tasks.jobs import evaluate_due
from tasks.models import Task, TaskStatus
from tests.a2a.conftest import wait_past
from tests.conftest import postgres_only
from tests.factories import (
    contribution_report,
    deadline_in,
    open_task_payload,
    open_task_request,
)
from tests.grpc.conftest import VERSION, stub_of_its_own
from tests.ledger.sealed_to_keypers import (
    keypers_held,
    releases_keep,
    sealed_contribute,
    sealed_payload,
)

pytestmark = postgres_only()
READS_EACH = 50
A2A = {"A2A-Version": "1.0"}
RELEASED = timedelta(seconds=60)  # after the deadline, when keypers release (SPEC §15.8)


@pytest.fixture(scope="module")
def stub(django_db_setup, tmp_path_factory) -> Iterator[a2a_pb2_grpc.A2AServiceStub]:
    """The SDK's generated stub on a gRPC server of the module's own."""
    with stub_of_its_own(tmp_path_factory.mktemp("grpc")) as stub:
        yield stub


@pytest.fixture
def awaiting_keys(settings, http, poster, post_task, make_agent, short_deadlines) -> Task:
    """A task past its deadline whose one report is sealed to the keypers, its releases kept:
    the worker's to evaluate, during a grace of ten minutes."""
    keypers = keypers_held(3)
    settings.CAIRN_KEYPERS = [
        {"name": k.listed.name, "hpke_key": k.listed.hpke_key, "url": k.listed.url} for k in keypers
    ]
    settings.CAIRN_KEYPER_THRESHOLD = 2
    settings.CAIRN_KEYPER_GRACE_S = 600
    deadline = deadline_in(2)
    task = post_task(poster, open_task_payload(open_task_request(deadline=deadline)))
    payload = sealed_payload(task, contribution_report(), keypers)
    contribution = sealed_contribute(make_agent().agent, task, payload)
    releases_keep(contribution, keypers[:2], released_at=task.deadline + RELEASED)
    wait_past(deadline)
    return task


def _states(http, stub, task_id: str) -> list[Any]:
    """The task's state as each read of every binding answers it."""

    def rpc(method: str, params: dict[str, Any], headers: dict[str, str]) -> Any:
        envelope = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        answer = http.post("/api/a2a", json=envelope, headers=headers, timeout=20)
        return answer.json()["result"]

    def listed(tasks: list[dict[str, Any]], state: Callable[[dict[str, Any]], Any]) -> Any:
        [found] = [state(task) for task in tasks if task["id"] == task_id]
        return found

    got = stub.GetTask(GetTaskRequest(id=task_id), metadata=VERSION, timeout=20)
    page = stub.ListTasks(ListTasksRequest(), metadata=VERSION, timeout=20)
    return [
        rpc("GetTask", {"id": task_id}, A2A)["status"]["state"],
        listed(rpc("ListTasks", {}, A2A)["tasks"], lambda t: t["status"]["state"]),
        rpc("tasks/get", {"id": task_id}, {})["status"]["state"],
        http.get(f"/api/a2a/tasks/{task_id}", headers=A2A).json()["status"]["state"],
        listed(
            http.get("/api/a2a/tasks", headers=A2A).json()["tasks"], lambda t: t["status"]["state"]
        ),
        http.get(f"/api/a2a-tasks/{task_id}").json()["state"],
        listed(http.get("/api/a2a-tasks").json()["tasks"], lambda t: t["state"]),
        "awaiting-keys" in http.get(f"/a2a/tasks/{task_id}").text,
        TaskState.Name(got.status.state),
        listed(
            [{"id": t.id, "state": t.status.state} for t in page.tasks],
            lambda t: TaskState.Name(t["state"]),
        ),
    ]


OPEN = [
    "TASK_STATE_WORKING",
    "TASK_STATE_WORKING",
    "working",
    "TASK_STATE_WORKING",
    "TASK_STATE_WORKING",
    "open",
    "open",
    True,
    "TASK_STATE_WORKING",
    "TASK_STATE_WORKING",
]


def _row_locker(task: Task) -> str:
    """The task row's `xmax`: the id of the last transaction that locked the row (or 0), which
    a lock taken since would have replaced with its own."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT xmax::text FROM tasks_task WHERE id = %s", [task.pk])
        (xmax,) = cursor.fetchone()
    return xmax


def test_reads_in_the_grace_neither_evaluate_nor_lock_the_task_nor_delay_the_worker(
    http, stub, awaiting_keys, time_machine
):
    task_id = str(awaiting_keys.pk)
    locker = _row_locker(awaiting_keys)

    # Every read of every binding, 50 times over, shows the task open, awaiting its keys
    for _ in range(READS_EACH):
        assert _states(http, stub, task_id) == OPEN
    # No read evaluated the task or took its row lock
    awaiting_keys.refresh_from_db()
    assert awaiting_keys.status == TaskStatus.WORKING and awaiting_keys.keys_pending
    assert _row_locker(awaiting_keys) == locker, "a read locked the task's row"
    assert tasks_evaluate_due() == 0

    # While the worker holds the task's row, every read still answers: none waits on it
    with transaction.atomic():
        Task.objects.select_for_update().get(pk=awaiting_keys.pk)
        assert _states(http, stub, task_id) == OPEN

    # Once the keypers' releases are due, the worker evaluates it at once
    time_machine.move_to(awaiting_keys.deadline + RELEASED + timedelta(seconds=1), tick=False)
    assert evaluate_due() == 1
    awaiting_keys.refresh_from_db()
    assert awaiting_keys.status != TaskStatus.WORKING and not awaiting_keys.keys_pending
