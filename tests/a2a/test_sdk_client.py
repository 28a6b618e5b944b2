"""The A2A door through the official Python SDK client (`a2a.client`), as an agent would use it:
the client is made from the card the live server publishes and the token rides on httpx."""

from __future__ import annotations

import uuid
from datetime import UTC

import pytest
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Task,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskState,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict

from agents.models import AuditEntry
from core.canonical import canonical_digest
from core.clock import format_instant, parse_instant
from tasks.models import Task as TaskRow
from tasks.rendered import task_view
from tests.a2a.conftest import as_json, run, sdk_client, sdk_send, wait_past
from tests.factories import (
    contribution_payload,
    contribution_report,
    deadline_in,
    open_task_payload,
    open_task_request,
)


def cairn_metadata(task: Task) -> dict:
    return as_json(MessageToDict(task.metadata))["cairn"]


def test_post_answers_a_working_task_whose_metadata_is_the_public_view(live_url, poster):
    payload = open_task_payload()
    message_id = str(uuid.uuid4())

    async def post():
        async with sdk_client(live_url, poster.token) as client:
            return await sdk_send(
                client, payload, message_id=message_id, metadata={"cairn": {"client": "pytest/1.0"}}
            )

    task = run(post())

    assert isinstance(task, Task)
    assert task.id == task.context_id and uuid.UUID(task.id)
    assert task.status.state == TaskState.TASK_STATE_WORKING
    view = task_view(TaskRow.objects.get(pk=task.id))
    assert cairn_metadata(task) == {
        key: value for key, value in view.items() if key != "evaluation"
    }
    assert format_instant(task.status.timestamp.ToDatetime(tzinfo=UTC)) == view["created_at"]
    assert list(task.artifacts) == [] and list(task.history) == []
    assert str(poster.agent.id) not in str(MessageToDict(task))
    audit = AuditEntry.objects.get()
    assert (audit.door, audit.client, audit.operation, audit.object_id) == (
        "a2a",
        "pytest/1.0",
        "task_post",
        task.id,
    )


def test_contributions_from_two_agents_each_get_a_receipt(live_url, poster, make_agent):
    first, second = make_agent("first"), make_agent("second")
    reports = [contribution_report(), contribution_report(verdict="source_unclear")]

    async def scenario():
        async with sdk_client(live_url, poster.token) as client:
            posted = await sdk_send(client, open_task_payload())
        answers = []
        for agent, report in zip((first, second), reports, strict=True):
            async with sdk_client(live_url, agent.token) as client:
                message_id = str(uuid.uuid4())
                task = await sdk_send(
                    client, contribution_payload(report), task_id=posted.id, message_id=message_id
                )
                answers.append((message_id, task))
        return posted, answers

    posted, answers = run(scenario())

    for count, ((message_id, task), report) in enumerate(
        zip(answers, reports, strict=True), start=1
    ):
        assert isinstance(task, Task) and task.id == posted.id
        assert task.status.state == TaskState.TASK_STATE_WORKING
        cairn = cairn_metadata(task)
        assert cairn["contributions_received"] == count
        receipt = cairn["contribution"]
        assert receipt["task_id"] == posted.id and receipt["operation_id"] == message_id
        assert receipt["report_digest"] == canonical_digest(report)
        assert receipt["sealed_until"] == cairn["deadline"]
        assert report["summary"] not in str(MessageToDict(task))
    assert sorted(AuditEntry.objects.values_list("door", flat=True)) == ["a2a"] * 3


def test_reads_need_no_token(live_url, poster, post_task):
    task = post_task(poster)

    async def read():
        async with sdk_client(live_url) as client:
            got = await client.get_task(GetTaskRequest(id=str(task.pk)))
            listed = await client.list_tasks(ListTasksRequest())
            with pytest.raises(TaskNotFoundError):
                await client.get_task(GetTaskRequest(id=str(uuid.uuid4())))
            with pytest.raises(TaskNotCancelableError):
                await client.cancel_task(CancelTaskRequest(id=str(task.pk)))
            return got, listed

    got, listed = run(read())

    assert got.id == str(task.pk) and got.status.state == TaskState.TASK_STATE_WORKING
    assert cairn_metadata(got)["title"] == task.title
    assert [t.id for t in listed.tasks] == [str(task.pk)]
    assert (listed.total_size, listed.page_size, listed.next_page_token) == (1, 50, "")


def test_list_tasks_across_pages(live_url, raised_caps, poster, post_task):
    posted = [str(post_task(poster).pk) for _ in range(5)]

    async def walk():
        seen, token, pages = [], "", 0
        async with sdk_client(live_url) as client:
            while True:
                page = await client.list_tasks(
                    ListTasksRequest(
                        status=TaskState.TASK_STATE_WORKING, page_size=2, page_token=token
                    )
                )
                pages += 1
                assert page.page_size == 2 and page.total_size == 5
                seen += [task.id for task in page.tasks]
                token = page.next_page_token
                if not token:
                    return seen, pages

    seen, pages = run(walk())

    assert seen == posted[::-1] and pages == 3


def test_the_life_of_a_task_to_its_evaluation(live_url, short_deadlines, make_agent):
    poster, first, second = make_agent("poster"), make_agent("first"), make_agent("second")
    deadline = deadline_in(2.5)
    request = open_task_request(deadline=deadline)
    lonely_request = open_task_request(
        deadline=deadline, title="A task that nobody answers before it closes"
    )
    reports = [
        contribution_report(),
        contribution_report(summary="The header constant is A2A_PROTOCOL_VERSION, 1.0."),
    ]
    contribution_ids = {}

    async def before_deadline():
        async with sdk_client(live_url, poster.token) as client:
            posted = await sdk_send(client, open_task_payload(request))
            lonely = await sdk_send(client, open_task_payload(lonely_request))
        for agent, report in zip((first, second), reports, strict=True):
            async with sdk_client(live_url, agent.token) as client:
                contribution_ids[agent.token] = str(uuid.uuid4())
                await sdk_send(
                    client,
                    contribution_payload(report),
                    task_id=posted.id,
                    message_id=contribution_ids[agent.token],
                )
        return posted, lonely

    async def after_deadline(posted, lonely):
        async with sdk_client(live_url, first.token) as client:
            done = await client.get_task(GetTaskRequest(id=posted.id))
            failed = await client.get_task(GetTaskRequest(id=lonely.id))
            listed = await client.list_tasks(
                ListTasksRequest(status=TaskState.TASK_STATE_COMPLETED, include_artifacts=True)
            )
            with pytest.raises(UnsupportedOperationError):  # -32004: closed to contributions
                await sdk_send(client, contribution_payload(), task_id=lonely.id)
            replayed = await sdk_send(
                client,
                contribution_payload(reports[0]),
                task_id=posted.id,
                message_id=contribution_ids[first.token],
            )
        return done, failed, listed, replayed

    posted, lonely = run(before_deadline())
    wait_past(deadline)
    done, failed, listed, replayed = run(after_deadline(posted, lonely))

    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    cairn = cairn_metadata(done)
    assert (cairn["state"], cairn["outcome"], cairn["verdict"]) == (
        "evaluated",
        "resolved",
        "source_supported",
    )
    assert format_instant(done.status.timestamp.ToDatetime(tzinfo=UTC)) == cairn["evaluated_at"]
    assert parse_instant(cairn["evaluated_at"]) >= parse_instant(deadline)
    (artifact,) = done.artifacts
    assert (artifact.artifact_id, artifact.name) == ("evaluation", "Evaluation")
    (part,) = artifact.parts
    assert part.media_type == "application/json"
    evaluation = as_json(MessageToDict(part.data))
    assert evaluation["outcome"] == "resolved" and evaluation["counts"]["source_supported"] == 2
    assert [item["report"] for item in evaluation["contributions"]] == reports
    assert [item["report_digest"] for item in evaluation["contributions"]] == [
        canonical_digest(r) for r in reports
    ]
    assert "evaluation" not in cairn

    assert failed.status.state == TaskState.TASK_STATE_FAILED
    assert cairn_metadata(failed)["outcome"] == "unresolved"
    assert as_json(MessageToDict(failed.artifacts[0].parts[0].data))["outcome"] == "unresolved"

    assert [task.id for task in listed.tasks] == [done.id] and len(listed.tasks[0].artifacts) == 1

    # A retry after a lost answer is safe even past the deadline: the original answer, unchanged.
    assert isinstance(replayed, Task) and replayed.status.state == TaskState.TASK_STATE_WORKING
    assert cairn_metadata(replayed)["contribution"]["operation_id"] == contribution_ids[first.token]


def test_a_refusal_is_an_agent_message(live_url, poster):
    async def post():
        async with sdk_client(live_url, poster.token) as client:
            return await sdk_send(
                client, open_task_payload(open_task_request(sources=["https://example.com/x"]))
            )

    answer = run(post())

    assert isinstance(answer, Message)
    body = as_json(MessageToDict(answer))
    assert body["role"] == "ROLE_AGENT" and body["metadata"] == {"cairn": {"accepted": False}}
    assert body["parts"][0]["data"]["error"]["code"] == "source_not_allowed"
    assert TaskRow.objects.count() == 0
