"""SPEC §8.7 through the official a2a-sdk 1.3.0 client allowed only gRPC: it reads the card the
web server publishes, connects to `python -m cairn.grpc` at the address the card gives, and
posts, replays, contributes, is refused, reads, lists, cancels, and is turned away without a
token, each as an agent would."""

from __future__ import annotations

import uuid

import grpc
import httpx
import pytest
from a2a.client import A2AClientError
from a2a.helpers import new_data_part
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Role,
    SendMessageRequest,
    Task,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskState,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict, ParseDict

from agents.models import AuditEntry, Operation
from tasks.models import Contribution
from tasks.models import Task as TaskRow
from tests.a2a.conftest import as_json, run, wait_past
from tests.factories import (
    contribution_payload,
    contribution_report,
    deadline_in,
    open_task_payload,
    open_task_request,
)
from tests.grpc.conftest import grpc_client


def sent(payload: dict, *, task_id: str = "", message_id: str | None = None) -> Message:
    message = Message(
        message_id=message_id or str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=[new_data_part(payload)],
    )
    if task_id:
        message.task_id = task_id
    return message


async def send(client, message: Message) -> Task | Message:
    """SendMessage through the SDK client: the one Task or Message it answers with."""
    (answer,) = [event async for event in client.send_message(SendMessageRequest(message=message))]
    kind = answer.WhichOneof("payload")
    assert kind in ("task", "message"), answer
    return getattr(answer, kind)


def refusal_code(answer: Task | Message) -> str:
    """The code of a SPEC §6 refusal Message."""
    assert isinstance(answer, Message), answer
    assert answer.role == Role.ROLE_AGENT
    assert as_json(MessageToDict(answer.metadata)) == {"cairn": {"accepted": False}}
    (part,) = answer.parts
    return MessageToDict(part.data)["error"]["code"]


def jsonrpc(url: str, method: str, params: dict, token: str | None = None) -> dict:
    """One JSON-RPC call to the web server's endpoint; its result."""
    headers = {"A2A-Version": "1.0"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer = httpx.post(f"{url}/api/a2a", json=body, headers=headers, timeout=20).json()
    assert "result" in answer, answer
    return answer["result"]


def writes() -> tuple[int, int, int, int]:
    return (
        TaskRow.objects.count(),
        Contribution.objects.count(),
        Operation.objects.count(),
        AuditEntry.objects.count(),
    )


def test_a_grpc_only_client_finds_the_server_on_the_card(card_url, settings):
    async def listed() -> ListTasksResponse:
        async with grpc_client(card_url) as client:
            return await client.list_tasks(ListTasksRequest())

    assert run(listed()).page_size == 50

    settings.CAIRN_GRPC_URL = ""  # gRPC off: the card offers a gRPC-only client nothing
    with pytest.raises(ValueError, match="no compatible transports"):
        run(listed())


def test_a_post_and_its_replay_are_one_task_written_once(card_url, poster):
    payload = open_task_payload()
    message_id = str(uuid.uuid4())

    async def post() -> Task | Message:
        async with grpc_client(card_url, poster.token) as client:
            return await send(client, sent(payload, message_id=message_id))

    first = run(post())
    written = writes()
    again = run(post())

    assert isinstance(first, Task) and first.status.state == TaskState.TASK_STATE_WORKING
    assert again == first
    assert writes() == written, "a replay writes nothing"
    audit = AuditEntry.objects.get()
    assert (audit.door, audit.operation, audit.object_id) == ("a2a", "task_post", first.id)


def test_a_second_contribution_is_refused_with_a_message(card_url, poster, make_agent, post_task):
    task = str(post_task(poster).pk)
    contributor = make_agent("contributor")

    async def contribute_twice() -> tuple[Task | Message, Task | Message]:
        async with grpc_client(card_url, contributor.token) as client:
            first = await send(client, sent(contribution_payload(), task_id=task))
            second = await send(
                client,
                sent(
                    contribution_payload(contribution_report(verdict="source_unclear")),
                    task_id=task,
                ),
            )
            return first, second

    first, second = run(contribute_twice())

    assert isinstance(first, Task) and first.id == task
    receipt = as_json(MessageToDict(first.metadata))["cairn"]["contribution"]
    assert receipt["task_id"] == task
    assert refusal_code(second) == "duplicate_contribution"
    assert second.task_id == second.context_id == task
    assert Contribution.objects.count() == 1


def test_a_refused_post_is_a_message_and_writes_nothing(card_url, poster):
    request = open_task_request(sources=["https://example.com/not-approved"])

    async def post() -> Task | Message:
        async with grpc_client(card_url, poster.token) as client:
            return await send(client, sent(open_task_payload(request)))

    assert refusal_code(run(post())) == "source_not_allowed"
    assert writes()[0] == 0


def test_the_evaluated_task_is_read_and_listed(card_url, make_agent):
    poster, first, second = make_agent("poster"), make_agent("first"), make_agent("second")
    deadline = deadline_in(2.5)

    async def before_deadline() -> Task:
        async with grpc_client(card_url, poster.token) as client:
            posted = await send(
                client, sent(open_task_payload(open_task_request(deadline=deadline)))
            )
        assert isinstance(posted, Task)
        for agent in (first, second):
            async with grpc_client(card_url, agent.token) as client:
                assert isinstance(
                    await send(client, sent(contribution_payload(), task_id=posted.id)), Task
                )
        return posted

    async def after_deadline(task_id: str) -> tuple[Task, ListTasksResponse]:
        async with grpc_client(card_url) as client:
            done = await client.get_task(GetTaskRequest(id=task_id))
            listed = await client.list_tasks(
                ListTasksRequest(status=TaskState.TASK_STATE_COMPLETED, include_artifacts=True)
            )
            return done, listed

    posted = run(before_deadline())
    wait_past(deadline)
    done, listed = run(after_deadline(posted.id))

    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    (artifact,) = done.artifacts
    assert (artifact.artifact_id, artifact.name) == ("evaluation", "Evaluation")
    assert as_json(MessageToDict(artifact.parts[0].data))["outcome"] == "resolved"
    assert list(listed.tasks) == [done]


def test_list_tasks_walks_a_filter_page_by_page(card_url, raised_caps, poster, post_task):
    posted = [str(post_task(poster).pk) for _ in range(5)]

    async def walk() -> tuple[list[str], int]:
        seen: list[str] = []
        token, pages = "", 0
        async with grpc_client(card_url) as client:
            while True:
                page = await client.list_tasks(
                    ListTasksRequest(
                        status=TaskState.TASK_STATE_WORKING, page_size=2, page_token=token
                    )
                )
                pages += 1
                assert (page.page_size, page.total_size) == (2, 5)
                seen += [task.id for task in page.tasks]
                token = page.next_page_token
                if not token:
                    return seen, pages
                assert not page.tasks[0].artifacts

    seen, pages = run(walk())

    assert seen == posted[::-1] and pages == 3


def test_no_task_can_be_canceled_and_an_unknown_one_is_not_found(card_url, poster, post_task):
    task = str(post_task(poster).pk)

    async def cancel() -> None:
        async with grpc_client(card_url) as client:
            with pytest.raises(TaskNotCancelableError):
                await client.cancel_task(CancelTaskRequest(id=task))
            with pytest.raises(TaskNotFoundError):
                await client.cancel_task(CancelTaskRequest(id=str(uuid.uuid4())))
            with pytest.raises(TaskNotFoundError):
                await client.get_task(GetTaskRequest(id=str(uuid.uuid4())))

    run(cancel())


def test_a_message_to_a_closed_task_is_unsupported(card_url, short_deadlines, poster, post_task):
    deadline = deadline_in(1.2)
    task = post_task(poster, open_task_payload(open_task_request(deadline=deadline)))
    wait_past(deadline)

    async def late() -> None:
        async with grpc_client(card_url, poster.token) as client:
            with pytest.raises(UnsupportedOperationError):
                await send(client, sent(contribution_payload(), task_id=str(task.pk)))

    run(late())


@pytest.mark.parametrize("token", [None, "cairn_" + "x" * 43], ids=["none", "unknown"])
def test_send_message_without_a_valid_token_is_unauthenticated_and_writes_nothing(card_url, token):
    async def post() -> None:
        async with grpc_client(card_url, token) as client:
            await send(client, sent(open_task_payload()))

    with pytest.raises(A2AClientError) as refused:
        run(post())

    cause = refused.value.__cause__
    assert isinstance(cause, grpc.aio.AioRpcError), refused.value
    assert cause.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "Bearer" in str(cause.details())
    assert writes() == (0, 0, 0, 0)


def test_get_task_is_the_task_json_rpc_serves_proto_for_proto(
    card_url, poster, make_agent, post_task, contribute
):
    """SPEC §8.4: one task, one Task, whichever binding answers (an open task with a receipt's
    count, then the same after a refused write)."""
    task = post_task(poster)
    contribute(make_agent("first"), task)

    async def over_grpc() -> tuple[Task, ListTasksResponse]:
        async with grpc_client(card_url) as client:
            return (
                await client.get_task(GetTaskRequest(id=str(task.pk))),
                await client.list_tasks(ListTasksRequest(page_size=1)),
            )

    got, listed = run(over_grpc())
    json_task = ParseDict(jsonrpc(card_url, "GetTask", {"id": str(task.pk)}), Task())
    json_page = ParseDict(jsonrpc(card_url, "ListTasks", {"pageSize": 1}), ListTasksResponse())

    assert got == json_task
    assert listed == json_page and list(listed.tasks) == [got]


def test_a_write_made_over_json_rpc_is_replayed_over_grpc(card_url, poster):
    """SPEC §8.6: the same messageId, by the same agent, on another binding: the same result,
    nothing written."""
    payload = open_task_payload()
    message_id = str(uuid.uuid4())
    first = jsonrpc(
        card_url,
        "SendMessage",
        {"message": {**MessageToDict(sent(payload, message_id=message_id))}},
        token=poster.token,
    )
    written = writes()

    async def replay() -> Task | Message:
        async with grpc_client(card_url, poster.token) as client:
            return await send(client, sent(payload, message_id=message_id))

    again = run(replay())

    assert again == ParseDict(first["task"], Task())
    assert writes() == written


def test_an_open_task_read_again_after_a_contribution_is_read_afresh(
    card_url, poster, make_agent, post_task, contribute
):
    """A stored text is parsed once and its wire form kept (`StoredForms`): a contribution writes the
    task's forms anew, and the next GetTask and ListTasks answer the new ones."""
    task = post_task(poster)

    async def over_grpc() -> tuple[Task, ListTasksResponse]:
        async with grpc_client(card_url) as client:
            return (
                await client.get_task(GetTaskRequest(id=str(task.pk))),
                await client.list_tasks(ListTasksRequest(page_size=1)),
            )

    before, listed_before = run(over_grpc())
    assert run(over_grpc()) == (before, listed_before)  # read again: the same Task
    contribute(make_agent("contributor"), task)
    after, listed_after = run(over_grpc())

    def count(read: Task) -> int:
        return as_json(MessageToDict(read.metadata))["cairn"]["contributions_received"]

    assert (count(before), count(after)) == (0, 1)
    assert list(listed_before.tasks) == [before] and list(listed_after.tasks) == [after]
    assert after == ParseDict(jsonrpc(card_url, "GetTask", {"id": str(task.pk)}), Task())
