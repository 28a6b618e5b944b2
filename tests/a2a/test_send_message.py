"""SPEC §8.3 and §6 over raw HTTP: posting, contributing, replays, and every refusal A2A can give,
each an agent Message whose data part holds the SPEC §6 error."""

from __future__ import annotations

import uuid

from agents.models import AuditEntry, Operation
from tasks.models import Contribution, Task
from tests.a2a.conftest import as_json, message, refusal_of, result_of
from tests.factories import (
    OTHER_SOURCE,
    contribution_payload,
    contribution_report,
    deadline_in,
    open_task_payload,
    open_task_request,
)


def send(rpc, agent, payload, **fields):
    return result_of(rpc("SendMessage", {"message": message(payload, **fields)}, token=agent.token))


def assert_nothing_written(tasks=0, contributions=0):
    assert Task.objects.count() == tasks
    assert Contribution.objects.count() == contributions
    assert Operation.objects.count() == AuditEntry.objects.count() == tasks + contributions


# Accepted writes -------------------------------------------------------------------------------------


def test_post_answers_the_new_working_task(rpc, poster):
    request = open_task_request()
    message_id = str(uuid.uuid4())

    result = send(rpc, poster, open_task_payload(request), message_id=message_id)

    task = result["task"]
    assert set(result) == {"task"}
    assert task["id"] == task["contextId"]
    assert task["status"]["state"] == "TASK_STATE_WORKING"
    cairn = as_json(task["metadata"]["cairn"])
    assert {key: cairn[key] for key in request} == request
    assert "history" not in task and "artifacts" not in task
    assert Operation.objects.get().operation_id == message_id
    assert AuditEntry.objects.get().door == "a2a"


def test_numbers_sent_as_doubles_are_read_as_the_integers_they_are(rpc, poster):
    # protobuf's Struct carries every number as a double: the SDK clients send 2 as 2.0.
    payload = open_task_payload()
    payload["request"]["min_independent"] = 2.0
    payload["request"]["max_contributors"] = 3.0
    payload["request"]["budget"]["amount"] = 0.0

    result = send(rpc, poster, payload)

    assert "task" in result
    assert Task.objects.get().min_independent == 2


def test_a_fractional_number_stays_fractional_and_is_refused(rpc, poster):
    payload = open_task_payload(open_task_request(min_independent=2.5))

    refusal_of(send(rpc, poster, payload), "invalid_payload")


def test_contribute_answers_the_task_with_the_receipt(rpc, poster, make_agent, post_task):
    task = post_task(poster)
    contributor = make_agent()
    message_id = str(uuid.uuid4())

    result = send(
        rpc, contributor, contribution_payload(), task_id=str(task.pk), message_id=message_id
    )

    cairn = as_json(result["task"]["metadata"]["cairn"])
    assert cairn["contributions_received"] == 1
    assert cairn["contribution"]["operation_id"] == message_id
    assert cairn["contribution"]["task_id"] == str(task.pk)
    assert AuditEntry.objects.get(operation="contribution_submit").door == "a2a"


def test_a_contribution_answers_the_task_as_get_task_then_serves_it_with_the_receipt(
    rpc, poster, make_agent, post_task
):
    task = post_task(poster)

    answered = send(rpc, make_agent(), contribution_payload(), task_id=str(task.pk))["task"]

    receipt = answered["metadata"]["cairn"].pop("contribution")
    assert answered == result_of(rpc("GetTask", {"id": str(task.pk)}))
    assert receipt["task_id"] == str(task.pk)


def test_the_same_message_id_and_payload_replays_the_original_answer(
    rpc, poster, make_agent, post_task
):
    payload = open_task_payload()
    message_id = str(uuid.uuid4())
    first = send(rpc, poster, payload, message_id=message_id)
    task = Task.objects.get()
    contributor = make_agent()
    contribution = contribution_payload()
    first_receipt = send(
        rpc, contributor, contribution, task_id=str(task.pk), message_id=message_id
    )

    assert send(rpc, poster, payload, message_id=message_id) == first
    assert (
        send(rpc, contributor, contribution, task_id=str(task.pk), message_id=message_id)
        == first_receipt
    )
    assert_nothing_written(tasks=1, contributions=1)


def test_client_metadata_reaches_the_audit_log(rpc, poster):
    send(
        rpc,
        poster,
        open_task_payload(),
        metadata={"cairn": {"client": "cairn_mcp/0.1.0"}, "other": 1},
    )

    assert AuditEntry.objects.get().client == "cairn_mcp/0.1.0"


# Refusals, in SPEC §6 order ---------------------------------------------------------------------------


# Each case is a subtest of one live-server test: each test costs a database flush.
# The cases are built when the test runs, so their deadlines are measured from then.
def post_refusals() -> list[tuple]:
    return [
        ({**open_task_payload(), "schema": "cairn.open_task/0.2"}, "unknown_schema"),
        (contribution_payload(), "unknown_schema"),
        ({"schema": "cairn.open_task/0.1", "request": open_task_request()}, "invalid_payload"),
        (open_task_payload(open_task_request(title="short")), "invalid_payload"),
        ("a task, please", "invalid_payload"),
        ([open_task_payload()], "invalid_payload"),
        (None, "invalid_payload"),
        (open_task_payload(public_output=False), "approval_required"),
        (open_task_payload(scope="everything"), "approval_required"),
        (open_task_payload(public_input_digest="sha256:" + "0" * 64), "preview_changed"),
        (
            open_task_payload(open_task_request(sources=["https://example.com/a"])),
            "source_not_allowed",
        ),
        (
            open_task_payload(open_task_request(sources=["http://github.com/a"])),
            "source_not_allowed",
        ),
        (open_task_payload(open_task_request(deadline=deadline_in(60))), "deadline_out_of_range"),
        (
            open_task_payload(open_task_request(deadline=deadline_in(8 * 86400))),
            "deadline_out_of_range",
        ),
        (
            open_task_payload(
                open_task_request(question="Please mail the answer to someone@example.org today.")
            ),
            "private_content",
        ),
    ]


def contribution_refusals() -> list[tuple]:
    return [
        ({**contribution_payload(), "schema": "cairn.task.contribution/9"}, "unknown_schema"),
        (open_task_payload(), "unknown_schema"),
        (contribution_payload(contribution_report(verdict="probably")), "invalid_payload"),
        ({**contribution_payload(), "extra": True}, "invalid_payload"),
        (contribution_payload(public_output=False), "approval_required"),
        (contribution_payload(public_output_digest="sha256:" + "1" * 64), "preview_changed"),
        (
            contribution_payload(
                contribution_report(source_urls=["https://github.com/other/file"])
            ),
            "source_not_in_task",
        ),
        (
            contribution_payload(
                contribution_report(summary="Ask me at someone@example.org for the details.")
            ),
            "private_content",
        ),
    ]


def test_a_post_the_rules_refuse_is_an_agent_message(rpc, poster, subtests):
    for payload, code in post_refusals():
        with subtests.test(code=code, payload=str(payload)[:120]):
            message_id = str(uuid.uuid4())
            refusal_of(send(rpc, poster, payload, message_id=message_id), code, sent_id=message_id)
    assert_nothing_written()


def test_a_contribution_the_rules_refuse_is_an_agent_message(
    rpc, poster, make_agent, post_task, subtests
):
    task = post_task(poster)
    contributor = make_agent()
    for payload, code in contribution_refusals():
        with subtests.test(code=code, payload=str(payload)[:120]):
            answer = send(rpc, contributor, payload, task_id=str(task.pk))
            refusal_of(answer, code, task_id=str(task.pk))
    assert_nothing_written(tasks=1)


def test_own_task_and_duplicate_contribution(rpc, poster, make_agent, post_task):
    task = post_task(poster)
    contributor = make_agent()
    send(rpc, contributor, contribution_payload(), task_id=str(task.pk))

    refusal_of(
        send(rpc, poster, contribution_payload(), task_id=str(task.pk)),
        "own_task",
        task_id=str(task.pk),
    )
    again = send(
        rpc,
        contributor,
        contribution_payload(contribution_report(verdict="source_unclear")),
        task_id=str(task.pk),
    )
    refusal_of(again, "duplicate_contribution", task_id=str(task.pk))
    assert_nothing_written(tasks=1, contributions=1)


def test_task_full(rpc, poster, make_agent, post_task):
    task = post_task(
        poster, open_task_payload(open_task_request(min_independent=2, max_contributors=2))
    )
    for _ in range(2):
        send(rpc, make_agent(), contribution_payload(), task_id=str(task.pk))

    refusal_of(
        send(rpc, make_agent(), contribution_payload(), task_id=str(task.pk)),
        "task_full",
        task_id=str(task.pk),
    )
    assert_nothing_written(tasks=1, contributions=2)


def test_posting_caps(rpc, settings, poster, make_agent):
    for _ in range(2):
        send(rpc, poster, open_task_payload())

    error = refusal_of(send(rpc, poster, open_task_payload()), "daily_cap")
    assert [issue["code"] for issue in error["issues"]] == ["daily_cap", "open_task_cap"]

    settings.CAIRN_TASKS_PER_AGENT_PER_DAY = 10
    refusal_of(send(rpc, poster, open_task_payload()), "open_task_cap")
    assert_nothing_written(tasks=2)


def test_contribution_daily_cap(rpc, make_agent, post_task):
    tasks = [post_task(make_agent()) for _ in range(4)]
    contributor = make_agent()
    for task in tasks[:3]:
        send(rpc, contributor, contribution_payload(), task_id=str(task.pk))

    refusal_of(
        send(rpc, contributor, contribution_payload(), task_id=str(tasks[3].pk)),
        "daily_cap",
        task_id=str(tasks[3].pk),
    )
    assert_nothing_written(tasks=4, contributions=3)


def test_a_reused_message_id_with_another_payload_is_an_idempotency_conflict(
    rpc, poster, make_agent, post_task
):
    message_id = str(uuid.uuid4())
    send(rpc, poster, open_task_payload(), message_id=message_id)
    task = Task.objects.get()

    other = open_task_payload(open_task_request(title="Another title for another task entirely"))
    refusal_of(
        send(rpc, poster, other, message_id=message_id), "idempotency_conflict", sent_id=message_id
    )
    contributor = make_agent()
    send(rpc, contributor, contribution_payload(), task_id=str(task.pk), message_id=message_id)
    changed = contribution_payload(contribution_report(verdict="source_unclear"))
    refusal_of(
        send(rpc, contributor, changed, task_id=str(task.pk), message_id=message_id),
        "idempotency_conflict",
        task_id=str(task.pk),
    )
    assert_nothing_written(tasks=1, contributions=1)


def test_a_source_off_the_allowlist_is_refused_naming_the_hosts_allowed(rpc, poster, settings):
    settings.CAIRN_SOURCE_HOSTS = ["github.com", "docs.python.org"]
    request = open_task_request(sources=["https://github.com/a", "https://example.com/b"])
    error = refusal_of(send(rpc, poster, open_task_payload(request)), "source_not_allowed")
    allowed = (
        "host example.com is not on this server's source allowlist (github.com, docs.python.org)"
    )
    assert error["issues"] == [
        {"path": "request.sources[1]", "code": "source_not_allowed", "message": allowed}
    ]
    assert allowed in error["message"]


def test_a_refusal_is_not_recorded_so_a_corrected_retry_is_judged_afresh(rpc, poster):
    message_id = str(uuid.uuid4())
    request = open_task_request(sources=["https://example.com/a"])
    refusal_of(
        send(rpc, poster, open_task_payload(request), message_id=message_id), "source_not_allowed"
    )

    result = send(
        rpc,
        poster,
        open_task_payload(open_task_request(sources=[OTHER_SOURCE])),
        message_id=message_id,
    )

    assert result["task"]["status"]["state"] == "TASK_STATE_WORKING"
