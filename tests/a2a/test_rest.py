"""SPEC §8.6: the A2A 1.0 HTTP+JSON binding over raw HTTP: every operation, refusal and error, in
this binding's form, and the same Task as JSON-RPC."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx

from tests.a2a.conftest import error_of, message, refusal_of, result_of, wait_past
from tests.factories import contribution_payload, deadline_in, open_task_payload, open_task_request
from tests.hostile import HOSTILE, says_nothing_of_python

A2A_JSON = "application/a2a+json"


def rest(
    http: httpx.Client,
    method: str,
    path: str,
    *,
    body: Any = None,
    content: bytes | None = None,
    token: str | None = None,
    version: str | None = "1.0",
    params: dict[str, Any] | None = None,
) -> httpx.Response:
    """One request to the binding, as a careful client sends it."""
    headers = {"Content-Type": A2A_JSON}
    if version is not None:
        headers["A2A-Version"] = version
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if body is not None:
        content = json.dumps(body).encode()
    return http.request(method, f"/api/a2a{path}", content=content, headers=headers, params=params)


def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == A2A_JSON
    return response.json()


def rest_error(response: httpx.Response, status: int, reason: str) -> dict[str, Any]:
    """Assert this binding's error object (A2A 1.0 §11.6) with this status and reason."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == status and isinstance(error["message"], str), error
    assert error["details"][0]["reason"] == reason, error
    assert error["details"][0]["domain"] == "a2a-protocol.org"
    return error


def send(http, payload: Any, *, token: str, task_id: str | None = None, **fields) -> Any:
    return rest(
        http,
        "POST",
        "/message:send",
        body={"message": message(payload, task_id=task_id, **fields)},
        token=token,
    )


def test_a_task_is_posted_read_and_is_the_same_task_as_on_json_rpc(http, rpc, poster):
    posted = ok(send(http, open_task_payload(), token=poster.token))

    task = posted["task"]
    assert set(posted) == {"task"} and task["status"]["state"] == "TASK_STATE_WORKING"
    assert task["id"] == task["contextId"]
    got = ok(rest(http, "GET", f"/tasks/{task['id']}"))
    assert got == result_of(rpc("GetTask", {"id": task["id"]})) == task


def test_a_contribution_carries_its_receipt(http, make_agent, post_task, poster):
    task = post_task(poster)

    answer = ok(send(http, contribution_payload(), token=make_agent().token, task_id=str(task.pk)))

    cairn = answer["task"]["metadata"]["cairn"]
    assert cairn["contributions_received"] == 1 and "contribution_id" in cairn["contribution"]


def test_a_refused_write_is_the_agent_message_of_json_rpc(http, poster):
    refused = open_task_payload(open_task_request(sources=["https://example.com/not-allowed"]))
    sent_id = str(uuid.uuid4())

    answer = ok(send(http, refused, token=poster.token, messageId=sent_id))

    refusal_of(answer, "source_not_allowed", sent_id=sent_id)
    text = ok(send(http, "hello", token=poster.token))
    assert refusal_of({"message": text["message"]}, "invalid_payload")


def test_message_send_needs_a_token_before_anything_else(http):
    answer = rest(http, "POST", "/message:send", content=b"{not json", version=None)

    assert answer.status_code == 401, answer.text
    assert answer.headers["WWW-Authenticate"] == 'Bearer realm="cairn"'
    error = answer.json()["error"]
    # A2A 1.0 §3.3.2: HTTP 401 / UNAUTHENTICATED; no A2A ErrorInfo, as authentication is none of A2A's errors
    assert (error["code"], error["status"]) == (401, "UNAUTHENTICATED") and "details" not in error
    assert "Bearer token" in error["message"]


def test_the_version_is_checked_after_the_token_and_before_the_body(http, poster, subtests):
    for version in (None, "0.3", "2.0"):
        with subtests.test(version=version):
            answer = rest(
                http, "POST", "/message:send", content=b"{", token=poster.token, version=version
            )
            error = rest_error(answer, 400, "VERSION_NOT_SUPPORTED")
            if version is None:
                assert "A2A-Version header is missing" in error["message"]
    rest_error(
        rest(http, "GET", f"/tasks/{uuid.uuid4()}", version=None), 400, "VERSION_NOT_SUPPORTED"
    )


def test_bad_bodies_are_this_bindings_errors_never_a_5xx(http, poster, subtests):
    deep = b'{"message": ' + b"[" * 100 + b"]" * 100 + b"}"
    for content in (b"{not json", b"", b'{"message": {"messageId": "\\ud800"}}', deep, b"\xff"):
        with subtests.test(content=content[:30]):
            answer = rest(http, "POST", "/message:send", content=content, token=poster.token)
            rest_error(answer, 400, "INVALID_REQUEST")
    for body in ("a string", {"message": "x"}, {"message": {"parts": ["x"]}}):
        with subtests.test(body=body):
            answer = rest(http, "POST", "/message:send", body=body, token=poster.token)
            rest_error(answer, 400, "INVALID_PARAMS")
    rest_error(
        rest(http, "POST", "/message:send", content=b" " * (300 * 1024), token=poster.token),
        413,
        "INVALID_REQUEST",
    )


def test_a_malformed_message_is_invalid_params(http, poster):
    answer = send(http, open_task_payload(), token=poster.token, role="ROLE_AGENT")

    rest_error(answer, 400, "INVALID_PARAMS")


def test_unknown_and_closed_tasks(http, make_agent, poster, post_task, settings):
    missing = str(uuid.uuid4())
    rest_error(rest(http, "GET", f"/tasks/{missing}"), 404, "TASK_NOT_FOUND")
    rest_error(rest(http, "GET", "/tasks/not-a-uuid"), 404, "TASK_NOT_FOUND")
    contribution = contribution_payload()
    rest_error(send(http, contribution, token=poster.token, task_id=missing), 404, "TASK_NOT_FOUND")
    settings.CAIRN_TASK_DEADLINE_MIN_S = 1
    deadline = deadline_in(1.2)
    task = post_task(poster, open_task_payload(open_task_request(deadline=deadline)))
    wait_past(deadline)

    closed = send(http, contribution, token=make_agent().token, task_id=str(task.pk))

    assert rest_error(closed, 400, "UNSUPPORTED_OPERATION")["details"][0]["metadata"] == {
        "code": "task_closed"
    }


def test_a_task_is_not_cancelable_with_409(http, poster, post_task):
    task = post_task(poster)

    rest_error(rest(http, "POST", f"/tasks/{task.pk}:cancel"), 409, "TASK_NOT_CANCELABLE")
    rest_error(rest(http, "POST", f"/tasks/{uuid.uuid4()}:cancel"), 404, "TASK_NOT_FOUND")


def test_list_tasks_takes_the_query_of_a2a_11_and_the_rules_of_8_5(
    http, make_agent, post_task, subtests
):
    tasks = [str(post_task(make_agent()).pk) for _ in range(3)]

    first = ok(rest(http, "GET", "/tasks", params={"status": "working", "pageSize": 2}))
    second = ok(
        rest(
            http,
            "GET",
            "/tasks",
            params={
                "status": "TASK_STATE_WORKING",
                "pageSize": 2,
                "pageToken": first["nextPageToken"],
            },
        )
    )

    assert [task["id"] for task in first["tasks"] + second["tasks"]] == tasks[::-1]
    assert first["totalSize"] == 3 and first["pageSize"] == 2 and second["nextPageToken"] == ""
    assert all("artifacts" not in task for task in first["tasks"])
    completed = ok(rest(http, "GET", "/tasks", params={"status": "completed"}))
    assert completed["tasks"] == [] and completed["totalSize"] == 0
    for query in (
        {"status": "pending"},
        {"status": "TASK_STATE_CANCELED"},
        {"pageSize": 101},
        {"pageSize": 0},
        {"pageToken": "forged"},
        {
            "status": "working",
            "pageToken": first["nextPageToken"],
            "pageSize": 2,
            "contextId": tasks[0],
        },
    ):
        with subtests.test(query=query):
            rest_error(rest(http, "GET", "/tasks", params=query), 400, "INVALID_PARAMS")


def test_params_protobuf_cannot_read_are_invalid_params_as_on_json_rpc(
    http, rpc, poster, evaluated_id, subtests
):
    """SPEC §8.6: the same question gets the same error on both bindings. JSON-RPC answers params
    its parser cannot read with -32602; the SDK's REST dispatcher would call them an invalid
    request, and would read `includeArtifacts=maybe` as false."""
    for query, params in (
        ({"pageSize": "many"}, {"pageSize": "many"}),
        ({"pageSize": "1.5"}, {"pageSize": 1.5}),
        ({"statusTimestampAfter": "yesterday"}, {"statusTimestampAfter": "yesterday"}),
        ({"historyLength": "x"}, {"historyLength": "x"}),
        ({"includeArtifacts": "maybe"}, {"includeArtifacts": "maybe"}),
        ({"includeArtifacts": "1"}, {"includeArtifacts": 1}),
    ):
        with subtests.test(query=query):
            answer = rest(http, "GET", "/tasks", params=query)
            rest_error(answer, 400, "INVALID_PARAMS")
            assert error_of(rpc("ListTasks", params), -32602)["message"] == "Invalid params"
    rest_error(rest(http, "GET", f"/tasks/{evaluated_id}?historyLength=x"), 400, "INVALID_PARAMS")
    sent = message(open_task_payload(), metadata=3)
    rest_error(
        rest(http, "POST", "/message:send", body={"message": sent}, token=poster.token),
        400,
        "INVALID_PARAMS",
    )
    error_of(rpc("SendMessage", {"message": sent}, token=poster.token), -32602)
    for word, listed in (("true", True), ("FALSE", False)):
        with subtests.test(includeArtifacts=word):
            tasks = ok(rest(http, "GET", "/tasks", params={"includeArtifacts": word}))["tasks"]
            assert [task["id"] for task in tasks] == [evaluated_id]
            assert ("artifacts" in tasks[0]) is listed


def test_what_cairn_does_not_offer_answers_the_errors_of_8_2(http, poster, post_task, subtests):
    task_id = str(post_task(poster).pk)
    for method, path, reason in (
        ("POST", "/message:stream", "UNSUPPORTED_OPERATION"),
        ("GET", f"/tasks/{task_id}:subscribe", "UNSUPPORTED_OPERATION"),
        ("POST", f"/tasks/{task_id}:subscribe", "UNSUPPORTED_OPERATION"),
        ("GET", "/extendedAgentCard", "UNSUPPORTED_OPERATION"),
        ("GET", f"/tasks/{task_id}/pushNotificationConfigs", "PUSH_NOTIFICATION_NOT_SUPPORTED"),
        ("POST", f"/tasks/{task_id}/pushNotificationConfigs", "PUSH_NOTIFICATION_NOT_SUPPORTED"),
        ("GET", f"/tasks/{task_id}/pushNotificationConfigs/p1", "PUSH_NOTIFICATION_NOT_SUPPORTED"),
        (
            "DELETE",
            f"/tasks/{task_id}/pushNotificationConfigs/p1",
            "PUSH_NOTIFICATION_NOT_SUPPORTED",
        ),
    ):
        with subtests.test(method=method, path=path):
            body = {"message": message(open_task_payload())} if path == "/message:stream" else {}
            answer = rest(http, method, path, body=body)
            rest_error(answer, 400, reason)


def test_unknown_routes_tenants_and_the_0_3_rest_routes_are_this_bindings_not_found(http, subtests):
    for method, path in (
        ("GET", "/nothing"),
        ("GET", "/acme/tasks"),
        ("POST", "/acme/message:send"),
        ("POST", "/v1/message:send"),
        ("GET", "/v1/tasks/x"),
    ):
        with subtests.test(path=path):
            rest_error(rest(http, method, path, body={}), 404, "METHOD_NOT_FOUND")
    wrong = rest(http, "DELETE", "/tasks")
    assert rest_error(wrong, 405, "METHOD_NOT_FOUND") and wrong.headers["Allow"] == "GET, HEAD"
    assert http.get("/api/a2a/").json()["name"] == "Cairn"  # the endpoint itself documents itself


def test_the_card_lists_the_binding(http, live_url):
    interfaces = http.get("/.well-known/agent-card.json").json()["supportedInterfaces"]

    assert {
        "url": f"{live_url}/api/a2a",
        "protocolBinding": "HTTP+JSON",
        "protocolVersion": "1.0",
    } in interfaces


def test_hostile_bytes_and_queries_are_this_bindings_errors_never_a_5xx(http, poster, subtests):
    for name, content in HOSTILE.items():
        with subtests.test(name=name):
            answer = rest(http, "POST", "/message:send", content=content, token=poster.token)
            rest_error(answer, 400, "INVALID_REQUEST")
            assert says_nothing_of_python(answer.content)
    deep: list = []
    for _ in range(55):  # within Cairn's 64 levels, past protobuf's own limit
        deep = [deep]
    too_deep = send(http, {"schema": "cairn.open_task/0.1", "x": deep}, token=poster.token)
    assert 400 <= too_deep.status_code < 500 and says_nothing_of_python(too_deep.content)
    for query in (
        {"pageSize": "many"},
        {"pageSize": "99999999999999999999999"},
        {"statusTimestampAfter": "yesterday"},
        {"historyLength": "-1"},
        {"status": ""},
        {"status": "\x00"},
        {"contextId": "x" * 5000},
    ):
        with subtests.test(query=query):
            answer = rest(http, "GET", "/tasks", params=query)
            assert answer.status_code in (200, 400), answer.text
            assert says_nothing_of_python(answer.content)
    for task_id in ("%00", "x" * 3000, "..%2F..%2Fetc"):
        with subtests.test(task_id=task_id):
            answer = rest(http, "GET", f"/tasks/{task_id}")
            assert answer.status_code == 404 and says_nothing_of_python(answer.content)
