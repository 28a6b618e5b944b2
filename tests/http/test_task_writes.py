"""Posting and contributing over the plain HTTP routes (SPEC §6, §9): every status a write can get."""

from __future__ import annotations

import base64
import itertools
import json
import threading
import uuid

import httpx

from agents.models import AuditEntry, Operation
from agents.services import agent_revoke
from core.canonical import canonical_digest
from tasks.models import Contribution, Task
from tasks.rendered import task_view
from tests.conftest import postgres_only
from tests.factories import (
    contribution_payload,
    contribution_report,
    deadline_in,
    open_task_payload,
    open_task_request,
)
from tests.http.conftest import bearer, refused, wait_past

WWW_AUTHENTICATE = 'Bearer realm="cairn"'


def _post_task(api, agent, payload=None, key=None):
    headers = bearer(agent.token) | ({"Idempotency-Key": key} if key else {})
    return api.post("/api/a2a-tasks", json=payload or open_task_payload(), headers=headers)


def _contribute(api, agent, task_id, payload=None, key=None):
    headers = bearer(agent.token) | ({"Idempotency-Key": key} if key else {})
    return api.post(
        f"/api/a2a-tasks/{task_id}/contributions",
        json=payload or contribution_payload(),
        headers=headers,
    )


# --- accepted writes -------------------------------------------------------------------------------


def test_posting_a_task_answers_201_with_its_view_and_audits_door_http(api, poster):
    response = _post_task(api, poster)

    assert response.status_code == 201
    assert "Idempotent-Replayed" not in response.headers
    body = response.json()
    assert list(body) == ["task"]
    task = Task.objects.get(pk=body["task"]["id"])
    assert body["task"] == task_view(task)
    assert body["task"]["state"] == "open" and body["task"]["contributions_received"] == 0
    assert api.get(f"/api/a2a-tasks/{task.id}").json() == body["task"]
    entry = AuditEntry.objects.get(object_id=str(task.id))
    assert (entry.door, entry.operation, entry.agent_id) == ("http", "task_post", poster.agent.id)


def test_contributing_answers_201_with_the_view_and_a_receipt(api, poster, post_task, make_agent):
    task = post_task(poster)
    contributor = make_agent()
    report = contribution_report()

    response = _contribute(
        api, contributor, task.id, contribution_payload(report), key="retry-safe-1"
    )

    assert response.status_code == 201
    body = response.json()
    assert list(body) == ["task", "receipt"]
    task.refresh_from_db()
    assert body["task"] == task_view(task) and body["task"]["contributions_received"] == 1
    receipt = body["receipt"]
    contribution = Contribution.objects.get(task=task)
    assert receipt == {
        "contribution_id": str(contribution.id),
        "task_id": str(task.id),
        "operation_id": "retry-safe-1",
        "report_digest": canonical_digest(report),
        "salt": contribution.salt,
        "received_at": receipt["received_at"],
        "sealed_until": task.deadline_text,
        "signature": receipt["signature"],
    }
    assert len(base64.urlsafe_b64decode(receipt["salt"] + "=")) == 32
    entry = AuditEntry.objects.get(object_id=str(contribution.id))
    assert (entry.door, entry.operation) == ("http", "contribution_submit")


def test_a_body_sent_without_a_json_content_type_is_still_read_as_json(api, poster):
    response = api.post(
        "/api/a2a-tasks",
        content=json.dumps(open_task_payload()).encode(),
        headers=bearer(poster.token) | {"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 201, response.text


# --- 401 -------------------------------------------------------------------------------------------


def test_a_write_without_a_valid_token_is_401_with_www_authenticate(
    api, poster, post_task, make_agent
):
    task = post_task(poster)
    revoked = make_agent()
    agent_revoke(agent=revoked.agent)
    writes = [
        ("/api/a2a-tasks", open_task_payload()),
        (f"/api/a2a-tasks/{task.id}/contributions", contribution_payload()),
    ]

    bad = (
        {},
        bearer("cairn_not-a-token"),
        bearer("garbage"),
        {"Authorization": "Token x"},
        bearer(revoked.token),
    )

    for (path, payload), headers in itertools.product(writes, bad):
        response = api.post(path, json=payload, headers=headers)
        refused(response, 401, "unauthorized", (path, headers))
        assert response.headers["WWW-Authenticate"] == WWW_AUTHENTICATE
    assert Task.objects.count() == 1 and Contribution.objects.count() == 0


def test_the_token_is_checked_before_the_json(api):
    response = api.post(
        "/api/a2a-tasks", content=b"not json", headers={"Content-Type": "application/json"}
    )
    refused(response, 401, "unauthorized")


# --- 413 -------------------------------------------------------------------------------------------


def test_a_body_over_256_kib_is_413_before_anything_else(api, poster, post_task):
    task = post_task(poster)
    big = json.dumps({"schema": "x" * (300 * 1024)}).encode()

    for path in ("/api/a2a-tasks", f"/api/a2a-tasks/{task.id}/contributions"):
        for headers in ({}, bearer(poster.token)):
            response = api.post(
                path, content=big, headers=headers | {"Content-Type": "application/json"}
            )
            refused(response, 413, "payload_too_large")


def test_a_chunked_body_over_256_kib_is_413_too(api, poster):
    def chunks():
        yield b'{"schema": "'
        for _ in range(300):
            yield b"x" * 1024
        yield b'"}'

    response = api.post("/api/a2a-tasks", content=chunks(), headers=bearer(poster.token))
    refused(response, 413, "payload_too_large")


# --- 400 -------------------------------------------------------------------------------------------


def test_a_body_that_is_not_json_is_400_invalid_json(api, poster, post_task, make_agent):
    task = post_task(make_agent())
    headers = bearer(poster.token) | {"Content-Type": "application/json"}
    lone_surrogate = json.dumps(
        {**open_task_payload(), "schema": "cairn.open_task/0.1\ud800"}
    ).encode()
    for body in (
        b"",
        b"{",
        b"not json",
        b'{"a": NaN}',
        b"\xff\xfe{}",
        b"{}}",
        b'{"a": 1,}',
        lone_surrogate,
    ):
        for path in ("/api/a2a-tasks", f"/api/a2a-tasks/{task.id}/contributions"):
            refused(
                api.post(path, content=body, headers=headers), 400, "invalid_json", (path, body)
            )
    # An escaped surrogate pair is a real character: taken as one.
    payload = open_task_payload(
        open_task_request(title="Does the \U0001f600 emoji survive the JSON escape?")
    )
    posted = api.post(
        "/api/a2a-tasks", content=json.dumps(payload, ensure_ascii=True).encode(), headers=headers
    )
    assert posted.status_code == 201 and "\U0001f600" in posted.json()["task"]["title"]


def test_json_that_is_not_an_object_is_the_services_invalid_payload(
    api, poster, post_task, make_agent
):
    task = post_task(make_agent())
    headers = bearer(poster.token) | {"Content-Type": "application/json"}
    for body in ([], "a string", 3, None, [open_task_payload()]):
        for path in ("/api/a2a-tasks", f"/api/a2a-tasks/{task.id}/contributions"):
            response = api.post(path, content=json.dumps(body).encode(), headers=headers)
            refused(response, 422, "invalid_payload", (path, body))


def test_a_malformed_idempotency_key_is_400_invalid_query(api, poster):
    for key in ("", "k" * 201, "tab\tkey", "caf\u00e9"):
        response = api.post(
            "/api/a2a-tasks",
            json=open_task_payload(),
            headers=[
                ("Authorization", f"Bearer {poster.token}"),
                ("Idempotency-Key", key.encode("latin-1")),
            ],
        )
        error = refused(response, 400, "invalid_query", key)
        assert error["issues"][0]["path"] == "Idempotency-Key"
    assert Task.objects.count() == 0


def test_an_idempotency_key_holding_del_is_the_http_layers_plain_400(api, poster):
    """DEL is no header character (RFC 9110): the HTTP parser refuses the request itself."""
    response = api.post(
        "/api/a2a-tasks",
        json=open_task_payload(),
        headers=[("Authorization", f"Bearer {poster.token}"), ("Idempotency-Key", b"line\x7f")],
    )
    assert (response.status_code, response.text) == (400, "Invalid HTTP request received.")
    assert Task.objects.count() == 0


def test_an_idempotency_key_of_200_printable_characters_is_taken(api, poster):
    key = "A-z 0~9!" * 25
    assert _post_task(api, poster, key=key).status_code == 201
    assert Operation.objects.get(agent=poster.agent).operation_id == key


def test_a_write_takes_no_query_parameters(api, poster):
    response = api.post(
        "/api/a2a-tasks?dry_run=1", json=open_task_payload(), headers=bearer(poster.token)
    )
    refused(response, 400, "invalid_query")


# --- 404 -------------------------------------------------------------------------------------------


def test_contributing_to_an_unknown_task_is_404(api, make_agent):
    agent = make_agent()
    refused(_contribute(api, agent, uuid.uuid4()), 404, "not_found")
    refused(_contribute(api, agent, "not-a-uuid"), 404, "not_found")


# --- 422: the rules, through the door --------------------------------------------------------------

REQUEST = open_task_request()
POSTING_REFUSALS = {
    "invalid_payload": open_task_payload(open_task_request(title="too short")),
    "unknown_schema": {**open_task_payload(), "schema": "cairn.open_task/9.9"},
    "approval_required": open_task_payload(public_output=False),
    "preview_changed": open_task_payload(
        public_input_digest=canonical_digest({"other": "request"})
    ),
    "source_not_allowed": open_task_payload(open_task_request(sources=["https://example.com/a"])),
    "deadline_out_of_range": open_task_payload(open_task_request(deadline=deadline_in(60))),
    "private_content": open_task_payload(
        open_task_request(
            question="Please mail the answer to someone@example.com when the source says so."
        )
    ),
}


def test_a_posting_the_rules_refuse_is_422_with_its_code(api, poster):
    for code, payload in POSTING_REFUSALS.items():
        error = refused(_post_task(api, poster, payload), 422, code)
        assert error["issues"] and error["issues"][0]["code"] == code
    assert Task.objects.count() == 0 and Operation.objects.count() == 0


def test_a_missing_field_and_an_unknown_field_are_invalid_payload(api, poster):
    missing = open_task_payload()
    del missing["approval"]
    unknown = open_task_payload()
    unknown["request"]["tags"] = ["x"]

    assert (
        refused(_post_task(api, poster, missing), 422, "invalid_payload")["issues"][0]["path"]
        == "approval"
    )
    assert (
        refused(_post_task(api, poster, unknown), 422, "invalid_payload")["issues"][0]["path"]
        == "request.tags"
    )


CONTRIBUTION_REFUSALS = {
    "invalid_payload": contribution_payload(contribution_report(verdict="true")),
    "unknown_schema": {**contribution_payload(), "schema": "cairn.task.contribution/2"},
    "approval_required": contribution_payload(scope="everything"),
    "preview_changed": contribution_payload(
        public_output_digest=canonical_digest({"another": "report"})
    ),
    "source_not_in_task": contribution_payload(
        contribution_report(source_urls=["https://github.com/elsewhere"])
    ),
    "private_content": contribution_payload(
        contribution_report(
            limitations=["Read the copy at /home/alice/src/a2a-js instead of the tag"]
        )
    ),
}


def test_a_contribution_the_rules_refuse_is_422_with_its_code(api, poster, post_task, make_agent):
    task = post_task(poster)
    contributor = make_agent()
    for code, payload in CONTRIBUTION_REFUSALS.items():
        error = refused(_contribute(api, contributor, task.id, payload), 422, code)
        assert error["issues"][0]["code"] == code
    assert Contribution.objects.count() == 0


# --- 409 -------------------------------------------------------------------------------------------


def test_own_task_duplicate_and_full_are_409(api, poster, post_task, make_agent):
    task = post_task(
        poster, open_task_payload(open_task_request(min_independent=2, max_contributors=2))
    )
    first, second = make_agent(), make_agent()

    refused(_contribute(api, poster, task.id), 409, "own_task")
    assert _contribute(api, first, task.id).status_code == 201
    refused(_contribute(api, first, task.id), 409, "duplicate_contribution")
    assert _contribute(api, second, task.id).status_code == 201
    refused(_contribute(api, make_agent(), task.id), 409, "task_full")
    task.refresh_from_db()
    assert task.contributions_count == 2


def test_a_closed_task_is_409_task_closed_but_a_replay_is_still_answered(
    api, short_deadlines, poster, make_agent
):
    posted = _post_task(
        api, poster, open_task_payload(open_task_request(deadline=deadline_in(1.5)))
    )
    assert posted.status_code == 201
    task = posted.json()["task"]
    early = make_agent()
    first = _contribute(api, early, task["id"], key="before-the-deadline")
    assert first.status_code == 201
    wait_past(task["deadline"])

    refused(_contribute(api, make_agent(), task["id"]), 409, "task_closed")
    late = _contribute(api, early, task["id"], key="before-the-deadline")
    assert late.status_code == 201 and late.headers["Idempotent-Replayed"] == "true"
    assert late.json() == first.json()
    # Shape comes before task_closed (SPEC §6).
    refused(
        _contribute(api, make_agent(), task["id"], {"schema": "cairn.task.contribution/0.1"}),
        422,
        "invalid_payload",
    )
    assert api.get(f"/api/a2a-tasks/{task['id']}").json()["contributions_received"] == 1


# --- 429 -------------------------------------------------------------------------------------------


def test_the_third_post_in_a_day_is_429_daily_cap_naming_both_caps(api, poster):
    assert _post_task(api, poster).status_code == 201
    assert _post_task(api, poster).status_code == 201

    error = refused(_post_task(api, poster), 429, "daily_cap")

    assert [issue["code"] for issue in error["issues"]] == ["daily_cap", "open_task_cap"]
    assert Task.objects.count() == 2


def test_a_third_open_task_is_429_open_task_cap(api, settings, poster):
    settings.CAIRN_TASKS_PER_AGENT_PER_DAY = 10
    assert _post_task(api, poster).status_code == 201
    assert _post_task(api, poster).status_code == 201

    error = refused(_post_task(api, poster), 429, "open_task_cap")

    assert [issue["code"] for issue in error["issues"]] == ["open_task_cap"]


def test_contributions_over_the_daily_cap_are_429(api, settings, make_agent, post_task):
    settings.CAIRN_CONTRIBUTIONS_PER_AGENT_PER_DAY = 1
    poster = make_agent()
    first, second = post_task(poster), post_task(poster)
    agent = make_agent()
    assert _contribute(api, agent, first.id).status_code == 201

    refused(_contribute(api, agent, second.id), 429, "daily_cap")


# --- Idempotency-Key -------------------------------------------------------------------------------


def test_the_same_key_and_body_replays_the_first_answer(api, poster):
    payload = open_task_payload()
    first = _post_task(api, poster, payload, key="post-1")

    again = _post_task(api, poster, payload, key="post-1")

    assert again.status_code == 201
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert Task.objects.count() == 1
    assert AuditEntry.objects.filter(operation="task_post").count() == 1


def test_a_replay_answers_the_first_body_even_after_the_task_changed(
    api, poster, post_task, make_agent
):
    task = post_task(poster)
    agent = make_agent()
    first = _contribute(api, agent, task.id, key="c-1")
    assert _contribute(api, make_agent(), task.id).status_code == 201

    again = _contribute(api, agent, task.id, key="c-1")

    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json() and again.json()["task"]["contributions_received"] == 1


def test_the_same_key_with_another_body_is_409_idempotency_conflict(
    api, poster, post_task, make_agent
):
    assert _post_task(api, poster, key="k").status_code == 201
    other = open_task_payload(open_task_request(title="Another title for another question"))
    refused(_post_task(api, poster, other, key="k"), 409, "idempotency_conflict")
    # The key is the agent's own: another route under it is a conflict too, another agent is free to use it.
    task = post_task(make_agent())
    refused(_contribute(api, poster, task.id, key="k"), 409, "idempotency_conflict")
    assert _post_task(api, make_agent(), key="k").status_code == 201
    assert Task.objects.count() == 3


def test_without_a_key_a_retry_is_a_new_write(api, poster):
    payload = open_task_payload()
    first = _post_task(api, poster, payload)
    second = _post_task(api, poster, payload)

    assert first.status_code == second.status_code == 201
    assert first.json()["task"]["id"] != second.json()["task"]["id"]
    assert "Idempotent-Replayed" not in second.headers


def test_a_source_off_the_allowlist_is_refused_naming_the_hosts_allowed(api, poster, settings):
    settings.CAIRN_SOURCE_HOSTS = ["github.com", "docs.python.org"]
    error = refused(
        _post_task(api, poster, POSTING_REFUSALS["source_not_allowed"]), 422, "source_not_allowed"
    )
    allowed = (
        "host example.com is not on this server's source allowlist (github.com, docs.python.org)"
    )
    assert error["message"] == f"request.sources[0]: {allowed}"
    assert error["issues"] == [
        {"path": "request.sources[0]", "code": "source_not_allowed", "message": allowed}
    ]


def test_a_refused_write_is_not_recorded_so_its_key_can_be_retried(api, poster):
    refused(
        _post_task(api, poster, POSTING_REFUSALS["source_not_allowed"], key="fix-and-retry"),
        422,
        "source_not_allowed",
    )
    response = _post_task(api, poster, key="fix-and-retry")
    assert response.status_code == 201 and "Idempotent-Replayed" not in response.headers


@postgres_only()
def test_concurrent_replays_of_one_key_write_once(live_url, make_agent, post_task):
    task = post_task(make_agent())
    agent = make_agent()
    body = json.dumps(contribution_payload()).encode()
    headers = bearer(agent.token) | {
        "Idempotency-Key": "same-key",
        "Content-Type": "application/json",
    }
    start = threading.Barrier(8)
    responses: list[httpx.Response] = []

    def send() -> None:
        with httpx.Client(base_url=live_url, timeout=30) as client:
            start.wait()
            responses.append(
                client.post(
                    f"/api/a2a-tasks/{task.id}/contributions", content=body, headers=headers
                )
            )

    threads = [threading.Thread(target=send) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert [response.status_code for response in responses] == [201] * 8
    assert sum("Idempotent-Replayed" not in response.headers for response in responses) == 1
    assert all(response.json() == responses[0].json() for response in responses)
    assert Contribution.objects.filter(task=task).count() == 1
    task.refresh_from_db()
    assert task.contributions_count == 1
    assert Operation.objects.filter(agent=agent.agent).count() == 1
