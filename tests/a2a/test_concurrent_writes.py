"""A2A writes do not queue behind one another: contributions that wait on their tasks' rows (the
worker evaluating them, the keeper's admin) leave every other agent's write answered meanwhile."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from a2a.helpers import new_data_part
from a2a.types import Message, Role, SendMessageRequest, a2a_pb2_grpc
from django.db import connection, transaction

from tasks.models import Contribution, Task
from tests.a2a.conftest import message, result_of
from tests.conftest import postgres_only
from tests.factories import contribution_payload
from tests.grpc.conftest import VERSION, stub_of_its_own

pytestmark = postgres_only()

Contribute = Callable[[str, Task], str]
# Enough waiting contributions at once that threads shared out in turn would put one behind another.
HELD = 6


@pytest.fixture(scope="module")
def grpc_stub(django_db_setup, tmp_path_factory) -> Iterator[a2a_pb2_grpc.A2AServiceStub]:
    with stub_of_its_own(tmp_path_factory.mktemp("grpc")) as stub:
        yield stub


def _over_json_rpc(live_url: str) -> Contribute:
    def contribute(token: str, task: Task) -> str:
        envelope = {
            "jsonrpc": "2.0",
            "id": str(uuid.uuid4()),
            "method": "SendMessage",
            "params": {"message": message(contribution_payload(), task_id=str(task.pk))},
        }
        headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
        answer = httpx.post(f"{live_url}/api/a2a", json=envelope, headers=headers, timeout=15)
        return result_of(answer)["task"]["id"]

    return contribute


def _over_grpc(stub: a2a_pb2_grpc.A2AServiceStub) -> Contribute:
    def contribute(token: str, task: Task) -> str:
        sent = Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            task_id=str(task.pk),
            parts=[new_data_part(contribution_payload())],
        )
        metadata = (("authorization", f"Bearer {token}"), *VERSION)
        answer = stub.SendMessage(SendMessageRequest(message=sent), metadata=metadata, timeout=15)
        return answer.task.id

    return contribute


def _backends_waiting_on_a_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        (waiting,) = cursor.fetchone()
    return waiting


def _held_writes_hold_up_no_other(contribute: Contribute, make_agent, post_task) -> None:
    held = [post_task(make_agent("poster")) for _ in range(HELD)]
    free = post_task(make_agent("poster"))
    contributors = [make_agent() for _ in range(HELD + 1)]

    with ThreadPoolExecutor(max_workers=HELD) as pool:
        with transaction.atomic():
            list(Task.objects.select_for_update().filter(pk__in=[task.pk for task in held]))
            waiting = [
                pool.submit(contribute, agent.token, task)
                for agent, task in zip(contributors[:HELD], held, strict=True)
            ]
            for _ in range(200):
                if _backends_waiting_on_a_lock() == HELD:
                    break
                time.sleep(0.05)
            assert _backends_waiting_on_a_lock() == HELD, "not every held contribution met its lock"

            assert contribute(contributors[-1].token, free) == str(free.pk)
            assert not any(write.done() for write in waiting)
        assert [write.result() for write in waiting] == [str(task.pk) for task in held]

    assert Contribution.objects.filter(task__in=[*held, free]).count() == HELD + 1


def test_contributions_waiting_on_their_tasks_hold_up_no_other_write(
    live_url, make_agent, post_task
):
    _held_writes_hold_up_no_other(_over_json_rpc(live_url), make_agent, post_task)


def test_over_grpc_too(grpc_stub, transactional_db, make_agent, post_task):
    _held_writes_hold_up_no_other(_over_grpc(grpc_stub), make_agent, post_task)
