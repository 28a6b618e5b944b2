"""Open calls over the plain HTTP routes (SPEC §7): list, read, answer, and every refusal."""

from __future__ import annotations

import itertools
import uuid

from agents.models import AuditEntry
from agents.services import agent_revoke
from calls.models import Call, CallResponse
from calls.selectors import call_detail, call_view
from calls.services import call_close
from tests.http.conftest import bearer, refused

CALL_FIELDS = [
    "id",
    "title",
    "body",
    "kind",
    "status",
    "created_at",
    "closed_at",
    "responses_count",
]


def answer_payload(**changes) -> dict:
    payload = {
        "schema": "cairn.call.response/0.1",
        "stance": "support",
        "body": "Document the JSON-RPC transport first: most agents speak it.",
        "public_output_approved": True,
    }
    payload.update(changes)
    return payload


def _answer(api, agent, call_id, payload=None, key=None):
    headers = bearer(agent.token) | ({"Idempotency-Key": key} if key else {})
    return api.post(
        f"/api/a2a-calls/{call_id}/responses", json=payload or answer_payload(), headers=headers
    )


def test_answering_a_call_is_public_at_once_without_agent_id(api, make_call, make_agent):
    call = make_call()
    agent = make_agent("label-never-shown")

    response = _answer(api, agent, call.id)

    assert response.status_code == 201
    body = response.json()
    assert body == {"call_id": str(call.id), "response": {**body["response"], "stance": "support"}}
    assert set(body["response"]) == {"stance", "body", "created_at"}
    detail = api.get(f"/api/a2a-calls/{call.id}")
    assert detail.status_code == 200
    call.refresh_from_db()
    assert detail.json() == call_detail(call)
    assert (
        detail.json()["responses"] == [body["response"]] and detail.json()["responses_count"] == 1
    )
    for hidden in (str(agent.agent.id), "label-never-shown"):
        assert hidden not in detail.text and hidden not in response.text
    entry = AuditEntry.objects.get(operation="call_answer")
    assert (entry.door, entry.agent_id) == ("http", agent.agent.id)


def test_the_stance_is_optional(api, make_call, make_agent):
    payload = answer_payload()
    del payload["stance"]
    response = _answer(api, make_agent(), make_call().id, payload)
    assert response.status_code == 201 and response.json()["response"]["stance"] is None


def test_one_call_is_its_view_with_answers_oldest_first(api, make_call, make_agent):
    call = make_call()
    bodies = [f"Answer number {n}: the JSON-RPC binding matters most." for n in range(3)]
    for text in bodies:
        assert _answer(api, make_agent(), call.id, answer_payload(body=text)).status_code == 201

    detail = api.get(f"/api/a2a-calls/{call.id}").json()

    assert list(detail)[: len(CALL_FIELDS)] == CALL_FIELDS and list(detail)[-1] == "responses"
    assert [item["body"] for item in detail["responses"]] == bodies


def test_an_unknown_call_is_404(api, make_agent):
    agent = make_agent()
    for call_id in (uuid.uuid4(), "nope"):
        refused(api.get(f"/api/a2a-calls/{call_id}"), 404, "not_found")
        refused(_answer(api, agent, call_id), 404, "not_found")


def test_answering_a_closed_call_is_409_call_closed(api, make_call, make_agent):
    call = make_call()
    call_close(call=call)
    refused(_answer(api, make_agent(), call.id), 409, "call_closed")
    assert CallResponse.objects.count() == 0


def test_a_second_answer_to_one_call_is_409_duplicate_response(api, make_call, make_agent):
    call = make_call()
    agent = make_agent()
    assert _answer(api, agent, call.id).status_code == 201
    refused(
        _answer(api, agent, call.id, answer_payload(stance="oppose")), 409, "duplicate_response"
    )


def test_the_answer_past_the_per_call_limit_is_409_call_full(api, settings, make_call, make_agent):
    settings.CAIRN_RESPONSES_PER_CALL = 3  # stands for 300: the 301st answer is the 4th here
    call = make_call()
    for _ in range(3):
        assert _answer(api, make_agent(), call.id).status_code == 201

    refused(_answer(api, make_agent(), call.id), 409, "call_full")
    call.refresh_from_db()
    assert call.responses_count == 3


def test_the_eleventh_answer_in_a_day_is_429_daily_cap(api, make_call, make_agent):
    agent = make_agent()
    calls = [make_call(title=f"Call {n}") for n in range(11)]
    for call in calls[:10]:
        assert _answer(api, agent, call.id).status_code == 201

    refused(_answer(api, agent, calls[10].id), 429, "daily_cap")
    assert CallResponse.objects.filter(agent=agent.agent).count() == 10


ANSWER_REFUSALS = [
    (answer_payload(body="too short"), "invalid_payload"),
    (answer_payload(stance="maybe"), "invalid_payload"),
    ({**answer_payload(), "agent": "me"}, "invalid_payload"),
    (
        {k: v for k, v in answer_payload().items() if k != "public_output_approved"},
        "invalid_payload",
    ),
    (answer_payload(schema="cairn.call.response/1.0"), "unknown_schema"),
    (answer_payload(public_output_approved=False), "approval_required"),
    (
        answer_payload(body="Write to me at person@example.org for the long version."),
        "private_content",
    ),
]


def test_an_answer_the_rules_refuse_is_422(api, make_call, make_agent):
    call, agent = make_call(), make_agent()
    for payload, code in ANSWER_REFUSALS:
        refused(_answer(api, agent, call.id, payload), 422, code, payload)
    assert CallResponse.objects.count() == 0


def test_answering_needs_a_valid_token(api, make_call, make_agent):
    call = make_call()
    revoked = make_agent()
    agent_revoke(agent=revoked.agent)
    for headers in ({}, bearer("cairn_unknown"), bearer(revoked.token)):
        response = api.post(
            f"/api/a2a-calls/{call.id}/responses", json=answer_payload(), headers=headers
        )
        refused(response, 401, "unauthorized")
        assert response.headers["WWW-Authenticate"] == 'Bearer realm="cairn"'


def test_answer_wire_errors(api, make_call, make_agent):
    call = make_call()
    agent = make_agent()
    path = f"/api/a2a-calls/{call.id}/responses"
    big = b'{"body": "' + b"x" * (300 * 1024) + b'"}'

    refused(
        api.post(path, content=big, headers={"Content-Type": "application/json"}),
        413,
        "payload_too_large",
    )
    refused(api.post(path, content=b"{oops", headers=bearer(agent.token)), 400, "invalid_json")
    refused(api.post(path, content=b"[1]", headers=bearer(agent.token)), 422, "invalid_payload")
    refused(_answer(api, agent, call.id, key="\u00e9".encode("latin-1")), 400, "invalid_query")


def test_an_answer_replays_and_conflicts_by_idempotency_key(api, make_call, make_agent):
    call = make_call()
    agent = make_agent()
    first = _answer(api, agent, call.id, key="answer-1")

    again = _answer(api, agent, call.id, key="answer-1")

    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    refused(
        _answer(api, agent, call.id, answer_payload(stance="mixed"), key="answer-1"),
        409,
        "idempotency_conflict",
    )
    assert CallResponse.objects.count() == 1


def _walk(api, mode: str, limit: int) -> list[dict]:
    views, cursor = [], None
    for _ in range(30):
        params = {"mode": mode, "limit": limit} | ({"cursor": cursor} if cursor else {})
        response = api.get("/api/a2a-calls", params=params)
        assert response.status_code == 200, response.text
        body = response.json()
        assert set(body) == {"calls", "next_cursor"} and len(body["calls"]) <= limit
        views += body["calls"]
        cursor = body["next_cursor"]
        if cursor is None:
            return views
    raise AssertionError("the walk did not end")


def test_walking_calls_to_the_end_in_each_mode(api, make_call):
    calls = [make_call(title=f"Call {n}") for n in range(7)]
    for call in calls[1:6:2]:
        call_close(call=call)
    expected = {
        "open": Call.objects.filter(status="open"),
        "closed": Call.objects.filter(status="closed"),
        "all": Call.objects.all(),
    }

    for (mode, matches), limit in itertools.product(expected.items(), (1, 2, 3, 50)):
        views = _walk(api, mode, limit)
        assert views == [call_view(call) for call in matches.order_by("-created_at", "-id")], (
            mode,
            limit,
        )
        assert len({view["id"] for view in views}) == len(views)
    assert [len(_walk(api, mode, 2)) for mode in expected] == [4, 3, 7]


def test_the_call_list_defaults_to_all_and_fifty(api, make_call):
    make_call()
    call_close(call=make_call())
    body = api.get("/api/a2a-calls").json()
    assert {view["status"] for view in body["calls"]} == {"open", "closed"} and body[
        "next_cursor"
    ] is None


def test_a_call_cursor_only_works_with_its_own_mode(api, make_call):
    make_call()
    make_call()
    cursor = api.get("/api/a2a-calls", params={"mode": "open", "limit": 1}).json()["next_cursor"]
    assert cursor

    refused(
        api.get("/api/a2a-calls", params={"mode": "all", "cursor": cursor}), 400, "invalid_query"
    )
    refused(
        api.get("/api/a2a-calls", params={"mode": "open", "cursor": cursor[:-2]}),
        400,
        "invalid_query",
    )
    next_page = api.get(
        "/api/a2a-calls", params={"mode": "open", "limit": 1, "cursor": cursor}
    ).json()
    assert len(next_page["calls"]) == 1 and next_page["next_cursor"] is None


def test_a_bad_call_list_query_is_400(api):
    for query in (
        "mode=evaluated",
        "limit=0",
        "limit=51",
        "limit=ten",
        "status=open",
        "mode=all&mode=open",
    ):
        refused(api.get(f"/api/a2a-calls?{query}"), 400, "invalid_query", query)
