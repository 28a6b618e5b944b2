"""SPEC §4.1–§4.2: every rule of contributing, and the receipt, through the service."""

from __future__ import annotations

import uuid

import pytest

from agents.models import Door
from agents.services import Caller
from core.canonical import canonical_digest
from core.errors import ErrorCode, Refusal
from tasks.models import Contribution
from tasks.rendered import task_view
from tasks.sealing import contribution_report as contribution_report_of
from tasks.selectors import agent_mine, task_get
from tasks.services import contribution_submit
from tests.factories import OTHER_SOURCE, SOURCE, contribution_payload, contribution_report


def submit(agent, task, payload=None, operation_id=None):
    return contribution_submit(
        Caller(agent, operation_id or str(uuid.uuid4()), Door.A2A),
        task_id=task.pk,
        payload=payload if payload is not None else contribution_payload(),
    )


@pytest.fixture
def task(poster, post_task):
    return post_task(poster)


@pytest.fixture
def contributor(make_agent):
    return make_agent("contributor")


def refusal_of(agent, task, payload=None) -> Refusal:
    before = Contribution.objects.count()
    with pytest.raises(Refusal) as caught:
        submit(agent, task, payload)
    assert Contribution.objects.count() == before, "a refusal changes nothing"
    return caught.value


def test_a_contribution_is_sealed_and_answered_with_a_receipt(task, contributor):
    report = contribution_report()
    result = submit(contributor.agent, task, contribution_payload(report), "message-1")

    receipt = result.body["receipt"]
    assert receipt["task_id"] == str(task.id)
    assert receipt["operation_id"] == "message-1"
    assert receipt["report_digest"] == canonical_digest(report)
    assert receipt["sealed_until"] == task.deadline_text
    assert receipt["received_at"].endswith("Z") and len(receipt["received_at"]) == 24
    view = result.body["task"]
    assert view["contributions_received"] == 1
    assert report["summary"] not in str(view) and "source_supported" not in str(view)
    stored = Contribution.objects.get()
    assert report["summary"].encode() not in bytes(stored.sealed_report)
    assert contribution_report_of(stored) == report


@pytest.mark.parametrize(
    "changes",
    [
        {"verdict": "true"},
        {"summary": "Too short."},
        {"summary": "s" * 2001},
        {"conditions": ["c"] * 11},
        {"conditions": [""]},
        {"attempts": []},
        {"attempts": ["a" * 501]},
        {"limitations": ["l"] * 11},
        {"source_urls": []},
        {"source_urls": [SOURCE, SOURCE]},
        {"summary": "A summary with a hidden \u2066 isolate inside of it."},
        {"extra": "field"},
        {"conditions": "not a list"},
    ],
)
def test_the_report_shape_is_enforced(task, contributor, changes):
    refusal = refusal_of(
        contributor.agent, task, contribution_payload(contribution_report(**changes))
    )
    assert refusal.code == ErrorCode.INVALID_PAYLOAD


@pytest.mark.parametrize(
    "name", ["verdict", "summary", "conditions", "attempts", "limitations", "source_urls", "schema"]
)
def test_every_report_field_is_required(task, contributor, name):
    report = contribution_report()
    del report[name]
    refusal = refusal_of(contributor.agent, task, contribution_payload(report))
    assert refusal.code == ErrorCode.INVALID_PAYLOAD
    assert [issue.path for issue in refusal.issues] == [name]


def test_the_approval_is_required(task, contributor):
    payload = contribution_payload()
    del payload["approval"]
    assert refusal_of(contributor.agent, task, payload).code == ErrorCode.INVALID_PAYLOAD


def test_another_schema_is_unknown(task, contributor):
    report = contribution_report(schema="cairn.task.contribution/9")
    assert (
        refusal_of(contributor.agent, task, contribution_payload(report)).code
        == ErrorCode.UNKNOWN_SCHEMA
    )


@pytest.mark.parametrize("changes", [{"public_output": False}, {"scope": "this_open_task"}])
def test_the_approval_must_cover_this_contribution(task, contributor, changes):
    assert (
        refusal_of(contributor.agent, task, contribution_payload(**changes)).code
        == ErrorCode.APPROVAL_REQUIRED
    )


def test_a_report_changed_after_the_preview_is_refused(task, contributor):
    payload = contribution_payload()
    payload["verdict"] = "source_contradicted"
    assert refusal_of(contributor.agent, task, payload).code == ErrorCode.PREVIEW_CHANGED


def test_the_digest_covers_the_schema_key(task, contributor):
    report = contribution_report()
    without_schema = {k: v for k, v in report.items() if k != "schema"}
    payload = {**report, "approval": contribution_payload(report)["approval"]}
    payload["approval"]["public_output_digest"] = canonical_digest(without_schema)
    assert refusal_of(contributor.agent, task, payload).code == ErrorCode.PREVIEW_CHANGED


def test_source_urls_must_be_the_tasks_own(task, contributor):
    report = contribution_report(source_urls=[OTHER_SOURCE, "https://github.com/elsewhere"])
    refusal = refusal_of(contributor.agent, task, contribution_payload(report))
    assert refusal.code == ErrorCode.SOURCE_NOT_IN_TASK
    assert [issue.path for issue in refusal.issues] == ["source_urls[1]"]


def test_private_content_is_refused_in_every_text(task, contributor):
    report = contribution_report(
        attempts=["Read the file", "Ran it with AKIAIOSFODNN7EXAMPLE as the key"],
        limitations=["See C:\\Users\\bob\\notes.txt"],
    )
    refusal = refusal_of(contributor.agent, task, contribution_payload(report))
    assert refusal.code == ErrorCode.PRIVATE_CONTENT
    assert [issue.path for issue in refusal.issues] == ["attempts[1]", "limitations[0]"]
    assert "AKIA" not in str(refusal.as_body())


def test_the_poster_cannot_contribute_to_its_own_task(task, poster):
    assert refusal_of(poster.agent, task).code == ErrorCode.OWN_TASK


def test_one_contribution_per_agent_per_task(task, contributor):
    submit(contributor.agent, task)
    assert refusal_of(contributor.agent, task).code == ErrorCode.DUPLICATE_CONTRIBUTION


def test_a_task_takes_at_most_max_contributors(task, make_agent):
    for _ in range(task.max_contributors):
        submit(make_agent().agent, task)
    assert refusal_of(make_agent().agent, task).code == ErrorCode.TASK_FULL


def test_three_contributions_per_agent_a_day(make_agent, post_task, contributor, settings):
    settings.CAIRN_TASKS_PER_AGENT_PER_DAY = settings.CAIRN_OPEN_TASKS_PER_AGENT = 10
    poster = make_agent()
    tasks = [post_task(poster) for _ in range(4)]
    for task in tasks[:3]:
        submit(contributor.agent, task)
    assert refusal_of(contributor.agent, tasks[3]).code == ErrorCode.DAILY_CAP


def test_state_and_cap_issues_are_all_listed_in_order(task, poster, settings):
    settings.CAIRN_CONTRIBUTIONS_PER_AGENT_PER_DAY = 0
    refusal = refusal_of(poster.agent, task)
    assert [issue.code for issue in refusal.issues] == [ErrorCode.OWN_TASK, ErrorCode.DAILY_CAP]
    assert refusal.code == ErrorCode.OWN_TASK


def test_an_unknown_task_is_not_found(contributor):
    for task_id in [uuid.uuid4(), "not-a-uuid"]:
        with pytest.raises(Refusal) as caught:
            contribution_submit(
                Caller(contributor.agent, "x", Door.A2A),
                task_id=task_id,
                payload=contribution_payload(),
            )
        assert caught.value.code == ErrorCode.NOT_FOUND


def test_a_task_past_its_deadline_is_closed_and_gets_evaluated(task, contributor, time_machine):
    time_machine.move_to(task.deadline, tick=True)
    assert refusal_of(contributor.agent, task).code == ErrorCode.TASK_CLOSED
    assert task_get(task.pk).status == "failed"


def test_task_closed_comes_right_after_shape(task, contributor, time_machine):
    time_machine.move_to(task.deadline, tick=True)
    bad_shape = contribution_payload(contribution_report(summary="short"))
    assert refusal_of(contributor.agent, task, bad_shape).code == ErrorCode.INVALID_PAYLOAD
    changed = contribution_payload()
    changed["verdict"] = "source_unclear"
    assert refusal_of(contributor.agent, task, changed).code == ErrorCode.TASK_CLOSED


def test_a_replay_returns_the_original_receipt_even_after_the_deadline(
    task, contributor, time_machine
):
    payload = contribution_payload()
    first = submit(contributor.agent, task, payload, "message-1")
    time_machine.move_to(task.deadline, tick=True)
    again = submit(contributor.agent, task, payload, "message-1")
    assert again.replayed and again.body == first.body
    assert Contribution.objects.count() == 1


def test_the_same_message_to_another_task_is_a_conflict(
    poster, post_task, task, contributor, settings
):
    settings.CAIRN_TASKS_PER_AGENT_PER_DAY = 10
    other = post_task(poster)
    payload = contribution_payload()
    submit(contributor.agent, task, payload, "message-1")
    with pytest.raises(Refusal) as caught:
        submit(contributor.agent, other, payload, "message-1")
    assert caught.value.code == ErrorCode.IDEMPOTENCY_CONFLICT


def test_only_the_author_reads_a_sealed_report_early(task, contributor, make_agent):
    report = contribution_report(summary="A unique marker 7f3a9c sits in this sealed summary text.")
    submit(contributor.agent, task, contribution_payload(report), "message-1")

    mine = agent_mine(contributor.agent)
    assert mine["contributions"][0]["report"] == report
    assert mine["contributions"][0]["receipt"]["operation_id"] == "message-1"
    assert "7f3a9c" not in str(agent_mine(make_agent().agent))
    assert "7f3a9c" not in str(task_view(task_get(task.pk)))
