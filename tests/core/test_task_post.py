"""SPEC §3.1: every rule of posting a task, asserted by its refusal code through the service."""

from __future__ import annotations

import uuid

import pytest

from agents.models import AuditEntry, Door
from agents.services import Caller
from core.canonical import canonical_digest
from core.errors import ErrorCode, Refusal
from tasks.models import Task
from tasks.services import task_post
from tests.factories import deadline_in, open_task_payload, open_task_request


def post(agent, payload, operation_id=None):
    return task_post(Caller(agent, operation_id or str(uuid.uuid4()), Door.HTTP), payload=payload)


def refusal_of(agent, payload) -> Refusal:
    with pytest.raises(Refusal) as caught:
        post(agent, payload)
    assert Task.objects.count() == 0, "a refusal changes nothing"
    return caught.value


def test_a_valid_task_is_public_at_once_with_its_request_as_approved(poster):
    request = open_task_request()
    body = post(poster.agent, open_task_payload(request)).body

    view = body["task"]
    assert {k: view[k] for k in request} == request
    assert view["public_input_digest"] == canonical_digest(request)
    assert view["state"] == "open"
    assert view["contributions_received"] == 0
    assert view["outcome"] is view["verdict"] is view["evaluation"] is view["evaluated_at"] is None
    assert "schema" not in view
    assert str(poster.agent.id) not in str(view)
    audit = AuditEntry.objects.get()
    assert (audit.door, audit.operation, audit.object_id) == ("http", "task_post", view["id"])


@pytest.mark.parametrize(
    "changes",
    [
        {"title": "too short"},
        {"title": "x" * 141},
        {"question": "Is it so? Say why."},
        {"question": "q" * 2001},
        {"title": "A title with a \u202e bidi override inside"},
        {"question": "A question with a zero\u200bwidth space in the middle of it"},
        {"question": "A question with a tab\tcharacter inside of it, which is a control"},
        {"sources": []},
        {"sources": [f"https://github.com/o/r/blob/main/f{i}.py" for i in range(11)]},
        {"sources": ["https://github.com/a", "https://github.com/a"]},
        {"sources": ["https://github.com/" + "a" * 490]},
        {"acceptance_criteria": []},
        {"acceptance_criteria": ["Criterion number one"] * 6},
        {"acceptance_criteria": ["too short"]},
        {"acceptance_criteria": ["c" * 501]},
        {"deadline": "2026-12-01T12:00:00Z"},
        {"deadline": "2026-12-01T12:00:00.000+00:00"},
        {"deadline": "2026-02-30T12:00:00.000Z"},
        {"deadline": 1796000000},
        {"min_independent": 1},
        {"min_independent": 6},
        {"max_contributors": 11},
        {"max_contributors": 1},
        {"min_independent": 4, "max_contributors": 3},
        {"min_independent": "2"},
        {"min_independent": 2.0},
        {"min_independent": True},
        {"budget": {"currency": "USD", "amount": 5}},
        {"budget": {"currency": "EUR", "amount": 0}},
        {"budget": {"currency": "USD", "amount": 0, "tip": 1}},
        {"budget": {"currency": "USD"}},
        {"surprise": "field"},
    ],
)
def test_the_request_shape_is_enforced(poster, changes):
    refusal = refusal_of(poster.agent, open_task_payload(open_task_request(**changes)))
    assert refusal.code == ErrorCode.INVALID_PAYLOAD
    assert all(issue.code == ErrorCode.INVALID_PAYLOAD for issue in refusal.issues)


def test_every_field_is_required(poster):
    request = open_task_request()
    for name in list(request):
        partial = {k: v for k, v in request.items() if k != name}
        refusal = refusal_of(poster.agent, open_task_payload(partial))
        assert refusal.code == ErrorCode.INVALID_PAYLOAD
        assert [issue.path for issue in refusal.issues] == [f"request.{name}"]


@pytest.mark.parametrize("missing", ["schema", "request", "approval"])
def test_the_envelope_is_complete(poster, missing):
    payload = open_task_payload()
    del payload[missing]
    assert refusal_of(poster.agent, payload).code == ErrorCode.INVALID_PAYLOAD


@pytest.mark.parametrize("payload", [[], "task", 3, None])
def test_a_payload_that_is_not_an_object_is_refused(poster, payload):
    refusal = refusal_of(poster.agent, payload)
    assert refusal.code == ErrorCode.INVALID_PAYLOAD
    assert refusal.issues[0].path == ""


def test_all_shape_issues_are_listed_at_once(poster):
    payload = open_task_payload(open_task_request(title="short", min_independent=9))
    payload["approval"]["extra"] = True
    refusal = refusal_of(poster.agent, payload)
    assert {issue.path for issue in refusal.issues} == {
        "request.title",
        "request.min_independent",
        "approval.extra",
    }


def test_another_schema_is_unknown(poster):
    payload = open_task_payload()
    payload["schema"] = "cairn.open_task/0.2"
    assert refusal_of(poster.agent, payload).code == ErrorCode.UNKNOWN_SCHEMA


@pytest.mark.parametrize(
    "approval_changes",
    [{"public_output": False}, {"scope": "everything"}, {"scope": "this_contribution"}],
)
def test_the_approval_must_cover_public_output_of_this_task(poster, approval_changes):
    assert (
        refusal_of(poster.agent, open_task_payload(**approval_changes)).code
        == ErrorCode.APPROVAL_REQUIRED
    )


def test_a_request_changed_after_the_preview_is_refused(poster):
    payload = open_task_payload()
    payload["request"]["title"] = "A different title than the one approved"
    refusal = refusal_of(poster.agent, payload)
    assert refusal.code == ErrorCode.PREVIEW_CHANGED
    assert refusal.issues[0].path == "approval.public_input_digest"


def test_shape_is_judged_before_approval(poster):
    payload = open_task_payload(open_task_request(title="short"), public_output=False)
    assert refusal_of(poster.agent, payload).code == ErrorCode.INVALID_PAYLOAD


@pytest.mark.parametrize(
    "url",
    [
        "http://github.com/a2aproject/a2a-js",
        "https://gitlab.com/a2aproject/a2a-js",
        "https://user:pw@github.com/a2aproject/a2a-js",
        "https://user@github.com/a2aproject/a2a-js",
        "https://github.com:443/a2aproject/a2a-js",
        "https://github.com/a2aproject/a2a-js?tab=readme",
        "https://github.com/a2aproject/a2a-js#readme",
        "https://api.github.com/repos/a2aproject/a2a-js",
        "https://github.com.evil.example/a2aproject",
        "https://GITHUB.com/a2aproject/a2a-js",
        "ftp://github.com/a2aproject",
        "not a url at all",
    ],
)
def test_sources_must_be_plain_https_urls_on_the_allowlist(poster, url):
    request = open_task_request(sources=["https://docs.python.org/3/library/json.html", url])
    refusal = refusal_of(poster.agent, open_task_payload(request))
    assert refusal.code == ErrorCode.SOURCE_NOT_ALLOWED
    assert [issue.path for issue in refusal.issues] == ["request.sources[1]"]


def test_the_allowlist_is_a_setting(poster, settings):
    settings.CAIRN_SOURCE_HOSTS = ["docs.python.org"]
    request = open_task_request(
        sources=["https://docs.python.org/3/", "https://github.com/a2aproject"]
    )
    assert refusal_of(poster.agent, open_task_payload(request)).code == ErrorCode.SOURCE_NOT_ALLOWED


@pytest.mark.parametrize("seconds", [60, 1799, 604800 + 60, -3600])
def test_the_deadline_must_be_half_an_hour_to_a_week_away(poster, seconds):
    refusal = refusal_of(
        poster.agent, open_task_payload(open_task_request(deadline=deadline_in(seconds)))
    )
    assert refusal.code == ErrorCode.DEADLINE_OUT_OF_RANGE
    assert [issue.message for issue in refusal.issues] == [
        "must be between 30 minutes and 7 days from now, written as "
        "YYYY-MM-DDTHH:MM:SS.sssZ (UTC, such as 2026-05-01T12:00:00.000Z)"
    ]


def test_the_deadline_range_is_said_in_the_settings_own_words(poster, settings):
    settings.CAIRN_TASK_DEADLINE_MIN_S, settings.CAIRN_TASK_DEADLINE_MAX_S = 90, 2 * 3600
    refusal = refusal_of(
        poster.agent, open_task_payload(open_task_request(deadline=deadline_in(30)))
    )
    assert refusal.issues[0].message.startswith("must be between 90 seconds and 2 hours from now")


def test_a_deadline_in_another_form_is_refused_with_the_form_written_out(poster):
    refusal = refusal_of(
        poster.agent, open_task_payload(open_task_request(deadline="2026-03-01T10:00:00Z"))
    )
    assert refusal.code == ErrorCode.INVALID_PAYLOAD
    assert [(issue.path, issue.message) for issue in refusal.issues] == [
        (
            "request.deadline",
            "must be written as YYYY-MM-DDTHH:MM:SS.sssZ (UTC, such as 2026-05-01T12:00:00.000Z)",
        )
    ]


def test_the_deadline_is_stored_and_shown_exactly_as_written(poster):
    deadline = deadline_in(7200)
    view = post(poster.agent, open_task_payload(open_task_request(deadline=deadline))).body["task"]
    assert view["deadline"] == deadline


@pytest.mark.parametrize(
    "changes, path",
    [
        ({"title": "Ask maintainer@example.com about the header"}, "request.title"),
        (
            {
                "question": "Use token ghp_abcdefghijklmnopqrstuvwxyz0123456789 to read the private fork first."
            },
            "request.question",
        ),
        (
            {
                "acceptance_criteria": [
                    "Names the function",
                    "Checks http://localhost:8000/api first",
                ]
            },
            "request.acceptance_criteria[1]",
        ),
        (
            {
                "question": "Why does /home/alice/project/client.ts differ from the published package?"
            },
            "request.question",
        ),
    ],
)
def test_private_content_is_refused_naming_the_field(poster, changes, path):
    refusal = refusal_of(poster.agent, open_task_payload(open_task_request(**changes)))
    assert refusal.code == ErrorCode.PRIVATE_CONTENT
    assert [issue.path for issue in refusal.issues] == [path]


def test_sources_are_judged_by_their_own_rule_before_privacy(poster):
    request = open_task_request(
        sources=["https://alice:secret@github.com/x"],
        question="Mail alice@example.com for the rest, please.",
    )
    assert refusal_of(poster.agent, open_task_payload(request)).code == ErrorCode.SOURCE_NOT_ALLOWED


def test_two_posts_a_day(poster, post_task, settings):
    settings.CAIRN_OPEN_TASKS_PER_AGENT = 10
    post_task(poster)
    post_task(poster)
    with pytest.raises(Refusal) as caught:
        post(poster.agent, open_task_payload())
    assert caught.value.code == ErrorCode.DAILY_CAP
    assert Task.objects.count() == 2


def test_two_open_tasks_at_once(poster, post_task, settings):
    settings.CAIRN_TASKS_PER_AGENT_PER_DAY = 10
    post_task(poster)
    post_task(poster)
    with pytest.raises(Refusal) as caught:
        post(poster.agent, open_task_payload())
    assert caught.value.code == ErrorCode.OPEN_TASK_CAP


def test_when_both_caps_bind_the_code_is_daily_cap_with_both_issues(poster, post_task):
    post_task(poster)
    post_task(poster)
    with pytest.raises(Refusal) as caught:
        post(poster.agent, open_task_payload())
    assert caught.value.code == ErrorCode.DAILY_CAP
    assert [issue.code for issue in caught.value.issues] == [
        ErrorCode.DAILY_CAP,
        ErrorCode.OPEN_TASK_CAP,
    ]


def test_caps_are_per_agent(make_agent, post_task):
    first, second = make_agent(), make_agent()
    post_task(first)
    post_task(first)
    post_task(second)
    assert Task.objects.filter(poster=second.agent).count() == 1


def test_replaying_an_operation_returns_the_first_result_and_writes_nothing(poster):
    payload = open_task_payload()
    first = post(poster.agent, payload, "op-1")
    again = post(poster.agent, payload, "op-1")
    assert again.replayed and not first.replayed
    assert again.body == first.body
    assert Task.objects.count() == 1
    assert AuditEntry.objects.count() == 1


def test_a_replay_is_answered_even_when_the_rules_would_now_refuse(poster, post_task, time_machine):
    payload = open_task_payload()
    first = post(poster.agent, payload, "op-1")
    post_task(poster)
    time_machine.move_to(deadline_in(7200), tick=True)
    again = post(poster.agent, payload, "op-1")
    assert again.replayed and again.body == first.body


def test_reusing_an_operation_id_for_another_request_is_a_conflict(poster):
    post(poster.agent, open_task_payload(), "op-1")
    other = open_task_payload(open_task_request(title="Another title for another task"))
    with pytest.raises(Refusal) as caught:
        post(poster.agent, other, "op-1")
    assert caught.value.code == ErrorCode.IDEMPOTENCY_CONFLICT
    assert Task.objects.count() == 1


def test_operation_ids_are_scoped_to_the_agent(make_agent):
    first, second = make_agent(), make_agent()
    post(first.agent, open_task_payload(), "shared-id")
    post(second.agent, open_task_payload(), "shared-id")
    assert Task.objects.count() == 2


def test_a_refused_operation_is_not_recorded(poster):
    with pytest.raises(Refusal):
        post(poster.agent, open_task_payload(public_output=False), "op-1")
    assert post(poster.agent, open_task_payload(), "op-1").replayed is False


def test_posting_schedules_the_evaluation_at_the_deadline(
    poster, post_task, django_capture_on_commit_callbacks
):
    from django_q.models import Schedule

    with django_capture_on_commit_callbacks(execute=True):
        task = post_task(poster)
    schedule = Schedule.objects.get(func="tasks.jobs.evaluate_task")
    assert schedule.args == repr((str(task.id),))
    assert schedule.next_run == task.deadline
