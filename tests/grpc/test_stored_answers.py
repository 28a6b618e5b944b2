"""gRPC's GetTask and ListTasks from the stored forms (`a2a_gateway.grpc_binding.stored_answer`),
in process on the read pool: the bytes sent are those protobuf writes for the Task or the page
the stored texts parse to, and whatever the read refuses goes to the SDK's servicer."""

from __future__ import annotations

import uuid

import orjson
import pytest
from a2a.types import (
    GetTaskRequest,
    InvalidParamsError,
    ListTasksRequest,
    ListTasksResponse,
    Task,
    TaskNotFoundError,
)
from asgiref.sync import async_to_sync
from google.protobuf.json_format import ParseDict

from a2a_gateway import read_connections
from a2a_gateway.grpc_binding import stored_answer
from a2a_gateway.stored_reads import StoredPage, StoredTask, stored_read
from tests.conftest import postgres_only


def parsed(text: str) -> Task:
    return ParseDict(orjson.loads(text), Task())


@pytest.mark.django_db(transaction=True)
@postgres_only("the read pool serves PostgreSQL only; elsewhere the servicer answers every read")
def test_stored_answers_are_protobufs_own_bytes_for_the_stored_forms(
    raised_caps, poster, make_agent, post_task, contribute
):
    tasks = [str(post_task(poster).pk) for _ in range(3)]
    contribute(make_agent("contributor"), post_task(poster))

    async def read() -> None:
        try:
            for task_id in tasks:
                request = GetTaskRequest(id=task_id)
                task = await stored_read(request, None, read_connections.POOL_SOURCE)
                assert isinstance(task, StoredTask)
                assert await stored_answer(request) == parsed(task.text).SerializeToString()
            for request in (
                ListTasksRequest(page_size=2),
                ListTasksRequest(page_size=50, include_artifacts=True),
            ):
                page = await stored_read(request, None, read_connections.POOL_SOURCE)
                assert isinstance(page, StoredPage) and page.tasks
                expected = ListTasksResponse(
                    tasks=[parsed(text) for text in page.tasks],
                    next_page_token=page.next_cursor,
                    page_size=page.page_size,
                    total_size=page.total,
                )
                assert await stored_answer(request) == expected.SerializeToString()
            # A refusal is the SDK's error, which the call is aborted with as the servicer would.
            with pytest.raises(TaskNotFoundError):
                await stored_answer(GetTaskRequest(id=str(uuid.uuid4())))
            with pytest.raises(InvalidParamsError):
                await stored_answer(ListTasksRequest(page_size=101))
        finally:
            await read_connections.close()

    async_to_sync(read)()
