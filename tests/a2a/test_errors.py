"""SPEC §8.2 over raw HTTP: every method's answer, every JSON-RPC error code, and the order of checks."""

from __future__ import annotations

import json
import uuid

from agents.services import agent_revoke
from tasks.models import Task
from tests.a2a.conftest import assert_unauthorized, error_of, message, result_of, wait_past
from tests.factories import contribution_payload, deadline_in, open_task_payload, open_task_request

HEADERS = {"Content-Type": "application/json", "A2A-Version": "1.0"}


def raw(http, content: bytes, headers: dict | None = None):
    return http.post("/api/a2a", content=content, headers={**HEADERS, **(headers or {})})


def envelope(method: str, params: dict | None = None, **fields) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": "req-1", "method": method, "params": params or {}, **fields}
    ).encode()


# -32700, -32600, -32601: the envelope ------------------------------------------------------------


# Many cases share one live-server test (as subtests): each test costs a database flush.


def test_a_body_that_is_not_json_is_a_parse_error(http, subtests):
    for content in (b"{not json", b"", b'{"jsonrpc": "2.0", "id": 1,', b"\xff\xfe{}"):
        with subtests.test(content=content):
            body = error_of(raw(http, content), -32700)
            assert "Traceback" not in json.dumps(body)


def test_a_malformed_envelope_is_an_invalid_request(http, subtests):
    for document in (
        {"jsonrpc": "1.0", "id": 1, "method": "GetTask", "params": {}},
        {"id": 1, "method": "GetTask", "params": {}},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "id": True, "method": "GetTask", "params": {}},
        {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {}, "extra": 1},
        [],
        "GetTask",
    ):
        with subtests.test(document=document):
            error_of(raw(http, json.dumps(document).encode()), -32600)


def test_a_batch_is_an_invalid_request(http, poster):
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": str(uuid.uuid4())}}]

    error_of(raw(http, json.dumps(batch).encode()), -32600)
    send = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "SendMessage",
        "params": {"message": message(open_task_payload())},
    }
    error_of(
        raw(http, json.dumps([send]).encode(), {"Authorization": f"Bearer {poster.token}"}), -32600
    )
    assert Task.objects.count() == 0


def test_a_body_over_256_kib_is_an_invalid_request_without_being_parsed(http, poster):
    not_even_json = b"{" * (256 * 1024 + 1)
    padded = envelope("GetTask", {"id": str(uuid.uuid4()), "pad": "x" * (256 * 1024)})

    error_of(raw(http, not_even_json), -32600)
    error_of(raw(http, padded), -32600)
    error_of(raw(http, not_even_json, {"Authorization": f"Bearer {poster.token}"}), -32600)


def test_a_body_of_256_kib_is_read(http):
    document = json.loads(envelope("GetTask", {"id": str(uuid.uuid4())}))
    document["params"]["pad"] = ""
    size = len(json.dumps(document).encode())
    document["params"]["pad"] = "x" * (256 * 1024 - size)
    content = json.dumps(document).encode()

    assert len(content) == 256 * 1024
    error_of(raw(http, content), -32001)


def test_an_unknown_method_is_method_not_found(rpc, subtests):
    for method in ("tasks/list", "sendMessage", "getTask", "Nope"):  # A2A 0.3's names: test_v0_3
        with subtests.test(method=method):
            error_of(rpc(method, {}), -32601)
    error_of(rpc("", {}), -32600)


# The token: HTTP 401 for SendMessage, after the envelope and method, before the version and params ------------


def test_send_message_without_a_valid_token_is_401(http, make_agent):
    revoked = make_agent("revoked")
    agent_revoke(agent=revoked.agent)
    content = envelope("SendMessage", {"message": message(open_task_payload())})

    for authorization in (
        None,
        "Bearer",
        "Bearer cairn_unknown-token",
        "Basic abc",
        f"Bearer {revoked.token}",
    ):
        headers = {"Authorization": authorization} if authorization else {}
        assert_unauthorized(raw(http, content, headers))
    assert Task.objects.count() == 0


def test_the_token_is_checked_before_the_version_and_the_params(http):
    for params in ({"message": "not a message"}, {"message": {"messageId": 5}}, {}):
        assert_unauthorized(
            http.post(
                "/api/a2a",
                content=envelope("SendMessage", params),
                headers={"Content-Type": "application/json"},
            )
        )


def test_the_token_is_checked_after_the_envelope_and_the_method(http):
    error_of(raw(http, b"{nope"), -32700)
    error_of(
        raw(http, json.dumps({"jsonrpc": "1.0", "id": 1, "method": "SendMessage"}).encode()), -32600
    )
    error_of(raw(http, envelope("sendMessage")), -32601)


def test_reads_ignore_a_bad_token(rpc, poster, post_task):
    task = post_task(poster)

    result = result_of(rpc("GetTask", {"id": str(task.pk)}, token="cairn_not-a-token"))

    assert result["id"] == str(task.pk)


# -32009: the A2A-Version header --------------------------------------------------------------------


def test_a_missing_or_other_version_is_refused(rpc, poster, subtests):
    for version in (None, "", "0.3", "0.3.0", "2.0", "one"):
        with subtests.test(version=version):
            error_of(rpc("GetTask", {"id": str(uuid.uuid4())}, version=version), -32009)
            error_of(rpc("ListTasks", {}, version=version), -32009)
            sent = {"message": message(open_task_payload())}
            error_of(rpc("SendMessage", sent, token=poster.token, version=version), -32009)
    assert Task.objects.count() == 0


def test_a_missing_version_says_the_header_is_missing_and_what_to_send(rpc, subtests):
    for version in (None, ""):
        with subtests.test(version=version):
            error = error_of(rpc("ListTasks", {}, version=version), -32009)
            assert "A2A-Version header is missing" in error["message"]
            assert "A2A-Version: 1.0" in error["message"]
    other = error_of(rpc("ListTasks", {}, version="0.3"), -32009)
    assert "missing" not in other["message"] and "0.3" in other["message"]


def test_any_1_x_version_is_served(rpc, subtests):
    for version in ("1.0", "1.1", "1.0.0"):
        with subtests.test(version=version):
            result = result_of(rpc("ListTasks", {}, version=version))
            assert result["tasks"] == [] and result["totalSize"] == 0


def test_the_version_is_checked_before_the_params(rpc, poster):
    error_of(rpc("GetTask", {"id": 5}, version="0.3"), -32009)
    error_of(rpc("ListTasks", {"pageSize": 0}, version=None), -32009)
    error_of(
        rpc("SendMessage", {"message": {"role": "ROLE_AGENT"}}, token=poster.token, version=None),
        -32009,
    )


# -32602: invalid params --------------------------------------------------------------------------


def test_a_malformed_message_is_invalid_params(rpc, poster, subtests):
    for change in (
        {"messageId": ""},
        {"messageId": "m" * 129},
        {"messageId": "line\nbreak"},
        {"messageId": "nul\u0000"},
        {"messageId": "c1\u0085control"},
        {"role": "ROLE_AGENT"},
        {"role": "ROLE_UNSPECIFIED"},
        {"role": "ROLE_NOPE"},
        {"parts": []},
        {"contextId": str(uuid.uuid4())},
        {"metadata": {"cairn": {"client": 5}}},
        {"metadata": {"cairn": {"client": "bad\u0000client"}}},
    ):
        with subtests.test(change=change):
            sent = {**message(open_task_payload()), **change}
            error_of(rpc("SendMessage", {"message": sent}, token=poster.token), -32602)
    assert Task.objects.count() == 0


def test_a_missing_required_field_is_named_as_the_sdk_names_it(rpc, poster, subtests):
    """The SDK's REQUIRED-field check, with its own error data, whatever the data part holds."""
    payload = open_task_payload()
    for params, field in (
        ({"message": {"role": "ROLE_USER", "parts": [{"data": payload}]}}, "message.message_id"),
        ({"message": {"messageId": "m-1", "parts": [{"data": payload}]}}, "message.role"),
        (
            {
                "message": message(payload),
                "configuration": {"taskPushNotificationConfig": {"url": ""}},
            },
            "configuration.task_push_notification_config.url",
        ),
    ):
        with subtests.test(field=field):
            error = error_of(rpc("SendMessage", params, token=poster.token), -32602)
            assert error["message"] == "Validation failed"
            violations = next(item for item in error["data"] if "fieldViolations" in item)
            assert [item["field"] for item in violations["fieldViolations"]] == [field]
    assert Task.objects.count() == 0


def test_a_context_other_than_the_task_is_invalid_params(rpc, poster, make_agent, post_task):
    task = post_task(poster)
    contributor = make_agent()
    sent = message(contribution_payload(), task_id=str(task.pk), contextId=str(uuid.uuid4()))
    same = message(contribution_payload(), task_id=str(task.pk), contextId=str(task.pk))

    error_of(rpc("SendMessage", {"message": sent}, token=contributor.token), -32602)
    assert "task" in result_of(rpc("SendMessage", {"message": same}, token=contributor.token))


def test_a_message_the_sdk_cannot_parse_is_invalid_params(rpc, poster):
    for params in ({"message": "text"}, {"message": {"parts": "x"}}, {}):
        error_of(rpc("SendMessage", params, token=poster.token), -32602)


def test_a_tenant_is_invalid_params(rpc, poster, subtests):
    for method, params in (
        ("SendMessage", {"tenant": "acme", "message": message(open_task_payload())}),
        ("GetTask", {"tenant": "acme", "id": "x"}),
        ("ListTasks", {"tenant": "acme"}),
        ("CancelTask", {"tenant": "acme", "id": "x"}),
    ):
        with subtests.test(method=method):
            error_of(rpc(method, params, token=poster.token), -32602)
    assert Task.objects.count() == 0


def test_a_bad_page_size_is_invalid_params(rpc, subtests):
    for page_size in (0, 101, -1, "ten", 2**40):
        with subtests.test(page_size=page_size):
            error_of(rpc("ListTasks", {"pageSize": page_size}), -32602)


def test_only_the_three_task_states_filter_and_anything_else_is_invalid_params(rpc, subtests):
    for status in (
        "NOPE",
        "TASK_STATE_CANCELED",
        "TASK_STATE_SUBMITTED",
        "TASK_STATE_REJECTED",
        5,
        99,
        "working",
    ):
        with subtests.test(status=status):
            error_of(rpc("ListTasks", {"status": status}), -32602)
    # "UNRECOGNIZED" is what @a2a-js/sdk 1.3.0 writes when its caller leaves status out: no filter.
    for status in (
        "TASK_STATE_UNSPECIFIED",
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
        "TASK_STATE_FAILED",
        3,
        4,
        None,
        "UNRECOGNIZED",
    ):
        with subtests.test(status=status):
            assert result_of(rpc("ListTasks", {"status": status}))["tasks"] == []


def test_a_bad_timestamp_or_history_length_is_invalid_params(rpc):
    error_of(rpc("ListTasks", {"statusTimestampAfter": "yesterday"}), -32602)
    error_of(rpc("ListTasks", {"historyLength": -1}), -32602)
    error_of(rpc("GetTask", {"id": str(uuid.uuid4()), "historyLength": -1}), -32602)
    error_of(rpc("GetTask", {}), -32602)


# -32001, -32002, -32003, -32004, -32007 ------------------------------------------------------------


def test_an_unknown_task_is_not_found(rpc, make_agent):
    contributor = make_agent()
    for task_id in (str(uuid.uuid4()), "not-a-uuid"):
        error_of(rpc("GetTask", {"id": task_id}), -32001)
        error_of(rpc("CancelTask", {"id": task_id}), -32001)
        sent = message(contribution_payload(), task_id=task_id)
        error_of(rpc("SendMessage", {"message": sent}, token=contributor.token), -32001)


def test_cancel_task_is_refused_for_every_existing_task(rpc, poster, post_task):
    task = post_task(poster)

    error_of(rpc("CancelTask", {"id": str(task.pk)}), -32002)
    error_of(rpc("CancelTask", {"id": str(task.pk)}, token=poster.token), -32002)
    assert (
        result_of(rpc("GetTask", {"id": str(task.pk)}))["status"]["state"] == "TASK_STATE_WORKING"
    )


def test_push_notifications_are_not_supported(rpc, subtests):
    for method, params in (
        ("CreateTaskPushNotificationConfig", {"taskId": "t", "url": "https://example.com/hook"}),
        ("GetTaskPushNotificationConfig", {"taskId": "t", "id": "c"}),
        ("ListTaskPushNotificationConfigs", {"taskId": "t"}),
        ("DeleteTaskPushNotificationConfig", {"taskId": "t", "id": "c"}),
    ):
        with subtests.test(method=method):
            error_of(rpc(method, params), -32003)


def test_streaming_is_not_supported(rpc, poster, post_task):
    task = post_task(poster)

    response = rpc(
        "SendStreamingMessage", {"message": message(open_task_payload())}, token=poster.token
    )
    assert response.headers["content-type"] == "application/json"
    error_of(response, -32004)
    error_of(rpc("SubscribeToTask", {"id": str(task.pk)}), -32004)
    assert Task.objects.count() == 1


def test_a_message_to_a_closed_task_is_unsupported(rpc, settings, poster, make_agent, post_task):
    settings.CAIRN_TASK_DEADLINE_MIN_S = 1
    deadline = deadline_in(1.2)
    task = post_task(poster, open_task_payload(open_task_request(deadline=deadline)))
    wait_past(deadline)

    for _ in range(2):  # overdue, then evaluated by the first answer's read
        sent = message(contribution_payload(), task_id=str(task.pk))
        error = error_of(rpc("SendMessage", {"message": sent}, token=make_agent().token), -32004)
        assert error["data"][0]["metadata"] == {"code": "task_closed"}
    task.refresh_from_db()
    assert task.contributions_count == 0 and task.evaluated_at is not None


def test_the_extended_card_is_an_unsupported_operation(rpc):
    """A2A 1.0 §3.3.4: the card declares no extended card, so the operation is unsupported
    (-32007 is for a card that declares one the server has not configured)."""
    error = error_of(rpc("GetExtendedAgentCard", {}), -32004)
    assert error["data"][0]["reason"] == "UNSUPPORTED_OPERATION"


# -32603 never leaks --------------------------------------------------------------------------------


def test_an_internal_error_says_nothing_of_the_code(rpc, settings, poster):
    settings.CAIRN_SOURCE_HOSTS = None  # a broken configuration: the service fails with a TypeError

    error = error_of(
        rpc("SendMessage", {"message": message(open_task_payload())}, token=poster.token), -32603
    )

    assert error["message"] == "Internal error"
    assert "NoneType" not in json.dumps(error) and "iterable" not in json.dumps(error)


# Other HTTP methods --------------------------------------------------------------------------------


def test_the_endpoint_answers_get_with_the_card_and_refuses_other_methods_in_json(http, subtests):
    assert http.get("/api/a2a").json()["name"] == "Cairn"
    for method, path, allowed in (
        ("PUT", "/api/a2a", "GET, HEAD, POST"),
        ("DELETE", "/api/a2a", "GET, HEAD, POST"),
        ("PUT", "/api/a2a/", "GET, HEAD, POST"),
        ("POST", "/.well-known/agent-card.json", "GET, HEAD"),
    ):
        with subtests.test(method=method, path=path):
            response = http.request(method, path, content=b"{}")
            assert response.status_code == 405
            assert response.headers["Allow"] == allowed
            assert response.headers["Content-Type"] == "application/json"
            assert response.json()["error"]["code"] == "method_not_allowed"


def test_a_notification_is_answered_with_a_null_id(http):
    content = json.dumps(
        {"jsonrpc": "2.0", "method": "GetTask", "params": {"id": str(uuid.uuid4())}}
    ).encode()

    body = raw(http, content).json()

    assert body["id"] is None and body["error"]["code"] == -32001


def test_both_paths_answer_as_the_rest_of_the_site_does(http, subtests):
    """Host rule, security headers, HEAD and Allow: the same on either adapter as on every page."""
    for path in ("/api/a2a", "/.well-known/agent-card.json"):
        with subtests.test(path=path):
            card = http.get(path)
            assert card.headers["Content-Type"] == "application/json"
            assert card.headers["X-Content-Type-Options"] == "nosniff"
            assert card.headers["X-Frame-Options"] == "DENY"
            assert "frame-ancestors 'none'" in card.headers["Content-Security-Policy"]

            head = http.head(path)
            assert head.status_code == 200 and head.content == b""
            assert head.headers["ETag"] == card.headers["ETag"]

            assert http.get(path, headers={"Host": "attacker.example"}).status_code == 400
            refused = raw(
                http, envelope("GetTask", {"id": str(uuid.uuid4())}), {"Host": "attacker.example"}
            )
            assert refused.status_code == 400

    assert http.post("/.well-known/agent-card.json", content=b"{}").headers["Allow"] == "GET, HEAD"
    assert http.put("/api/a2a", content=b"{}").headers["Allow"] == "GET, HEAD, POST"
    answered = raw(http, envelope("GetTask", {"id": str(uuid.uuid4())}))
    assert answered.headers["Referrer-Policy"] == "same-origin"
    assert answered.headers["Cross-Origin-Opener-Policy"] == "same-origin"


def test_a_host_let_in_or_shut_out_is_answered_so_at_once(http, settings, subtests):
    """The A2A door keeps each Host's verdict; a change of ALLOWED_HOSTS takes effect anyway."""
    for path in ("/api/a2a", "/.well-known/agent-card.json", "/api/a2a/tasks"):
        with subtests.test(path=path):
            headers = {"Host": "cairn.example", "A2A-Version": "1.0"}
            assert http.get(path, headers=headers).status_code == 400

            settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "cairn.example"]
            assert http.get(path, headers=headers).status_code == 200

            settings.ALLOWED_HOSTS = [h for h in settings.ALLOWED_HOSTS if h != "cairn.example"]
            assert http.get(path, headers=headers).status_code == 400
