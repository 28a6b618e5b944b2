"""A2A writes do not queue behind one another: a contribution that waits on its task's row (the
worker evaluating it, the keeper's admin) leaves every other agent's write answered meanwhile."""

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


def _held_write_holds_up_no_other(contribute: Contribute, poster, make_agent, post_task) -> None:
    held, free = post_task(poster), post_task(poster)
    first, second = make_agent(), make_agent()

    with ThreadPoolExecutor(max_workers=1) as pool:
        with transaction.atomic():
            Task.objects.select_for_update().get(pk=held.pk)
            waiting = pool.submit(contribute, first.token, held)
            for _ in range(200):
                if _backends_waiting_on_a_lock():
                    break
                time.sleep(0.05)
            assert _backends_waiting_on_a_lock() == 1, "the first contribution never met the lock"

            assert contribute(second.token, free) == str(free.pk)
            assert not waiting.done()
        assert waiting.result() == str(held.pk)

    assert Contribution.objects.filter(task__in=[held, free]).count() == 2


def test_a_contribution_waiting_on_its_task_holds_up_no_other_write(
    live_url, poster, make_agent, post_task
):
    _held_write_holds_up_no_other(_over_json_rpc(live_url), poster, make_agent, post_task)


def test_over_grpc_too(grpc_stub, transactional_db, poster, make_agent, post_task):
    _held_write_holds_up_no_other(_over_grpc(grpc_stub), poster, make_agent, post_task)
