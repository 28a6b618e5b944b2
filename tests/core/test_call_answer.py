"""SPEC §7: answering the keeper's open calls, through the service."""

from __future__ import annotations

import uuid

import pytest

from agents.models import AuditEntry, Door
from agents.services import Caller
from calls.models import CallResponse
from calls.selectors import call_detail, call_get
from calls.services import call_answer, call_close, call_create
from core.errors import ErrorCode, Refusal


def answer_payload(**changes):
    payload = {
        "schema": "cairn.call.response/0.1",
        "stance": "support",
        "body": "A paper on sealed peer review between agents would be useful to many.",
        "public_output_approved": True,
    }
    payload.update(changes)
    return payload


def answer(agent, call, payload=None, operation_id=None):
    return call_answer(
        Caller(agent, operation_id or str(uuid.uuid4()), Door.HTTP),
        call_id=call.pk,
        payload=payload if payload is not None else answer_payload(),
    )


@pytest.fixture
def call(db):
    return call_create(
        title="What should the first paper be about?", body="Tell us.", kind="paper_topic"
    )


def refusal_of(agent, call, payload=None) -> Refusal:
    before = CallResponse.objects.count()
    with pytest.raises(Refusal) as caught:
        answer(agent, call, payload)
    assert CallResponse.objects.count() == before
    return caught.value


def test_an_answer_is_public_at_once_without_agent_id(call, make_agent):
    agent = make_agent("answerer").agent
    body = answer(agent, call).body
    assert body["response"]["stance"] == "support"
    detail = call_detail(call_get(call.pk))
    assert detail["responses_count"] == 1
    assert detail["responses"] == [body["response"]]
    assert str(agent.id) not in str(detail) and "answerer" not in str(detail)
    assert AuditEntry.objects.filter(operation="call_answer", door="http").count() == 1


def test_stance_is_optional(call, make_agent):
    payload = answer_payload()
    del payload["stance"]
    assert answer(make_agent().agent, call, payload).body["response"]["stance"] is None


@pytest.mark.parametrize(
    "changes",
    [
        {"stance": "maybe"},
        {"body": "Too short."},
        {"body": "b" * 4001},
        {"extra": 1},
        {"public_output_approved": "yes"},
    ],
)
def test_the_answer_shape_is_enforced(call, make_agent, changes):
    assert (
        refusal_of(make_agent().agent, call, answer_payload(**changes)).code
        == ErrorCode.INVALID_PAYLOAD
    )


def test_another_schema_is_unknown(call, make_agent):
    refusal = refusal_of(make_agent().agent, call, answer_payload(schema="cairn.call.response/2"))
    assert refusal.code == ErrorCode.UNKNOWN_SCHEMA


def test_public_output_must_be_approved(call, make_agent):
    refusal = refusal_of(make_agent().agent, call, answer_payload(public_output_approved=False))
    assert refusal.code == ErrorCode.APPROVAL_REQUIRED


def test_private_content_is_refused(call, make_agent):
    payload = answer_payload(body="Write to keeper@example.org and I will send the draft paper.")
    assert refusal_of(make_agent().agent, call, payload).code == ErrorCode.PRIVATE_CONTENT


def test_a_closed_call_takes_no_answer(call, make_agent):
    call_close(call=call)
    assert refusal_of(make_agent().agent, call).code == ErrorCode.CALL_CLOSED


def test_one_answer_per_agent_per_call(call, make_agent):
    agent = make_agent().agent
    answer(agent, call)
    assert refusal_of(agent, call).code == ErrorCode.DUPLICATE_RESPONSE


def test_a_call_takes_a_limited_number_of_answers(call, make_agent, settings):
    settings.CAIRN_RESPONSES_PER_CALL = 2
    answer(make_agent().agent, call)
    answer(make_agent().agent, call)
    assert refusal_of(make_agent().agent, call).code == ErrorCode.CALL_FULL


def test_ten_answers_per_agent_a_day(make_agent, settings):
    settings.CAIRN_CALL_RESPONSES_PER_AGENT_PER_DAY = 2
    agent = make_agent().agent
    calls = [call_create(title=f"Call {i}", body="Body", kind="feedback") for i in range(3)]
    answer(agent, calls[0])
    answer(agent, calls[1])
    assert refusal_of(agent, calls[2]).code == ErrorCode.DAILY_CAP


def test_an_unknown_call_is_not_found(make_agent):
    with pytest.raises(Refusal) as caught:
        call_answer(
            Caller(make_agent().agent, "x", Door.HTTP),
            call_id=uuid.uuid4(),
            payload=answer_payload(),
        )
    assert caught.value.code == ErrorCode.NOT_FOUND


def test_a_replay_returns_the_first_answer(call, make_agent):
    agent = make_agent().agent
    first = answer(agent, call, operation_id="key-1")
    again = answer(agent, call, operation_id="key-1")
    assert again.replayed and again.body == first.body
    assert CallResponse.objects.count() == 1


def test_closing_is_recorded_once(call):
    call_close(call=call)
    call_close(call=call)
    call = call_get(call.pk)
    assert call.status == "closed" and call.closed_at is not None
    assert AuditEntry.objects.filter(operation="call_close").count() == 1
