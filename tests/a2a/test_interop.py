"""What A2A 1.0 lets a generic client send, and the official TCK (a2aproject/a2a-tck, 1.0-dev)
sends: Cairn answers it as A2A says (SPEC §8.1, §8.2, §8.5), not with its own narrower rules."""

from __future__ import annotations

import json
import uuid

import httpx

from tasks.models import Task
from tests.a2a.conftest import error_of, message, refusal_of, result_of
from tests.factories import contribution_payload, open_task_payload

HEADERS = {"Content-Type": "application/json", "A2A-Version": "1.0"}


def test_any_message_id_of_1_to_128_characters_is_an_operation_id(rpc, poster, subtests):
    for message_id in (
        f"duplicate-{uuid.uuid4()}",
        f"test-{uuid.uuid4().hex}",
        "m",
        "x" * 128,
        "étape 1 — ✓",
    ):
        with subtests.test(message_id=message_id):
            sent = message(open_task_payload(), message_id=message_id)
            first = result_of(rpc("SendMessage", {"message": sent}, token=poster.token))
            again = result_of(rpc("SendMessage", {"message": sent}, token=poster.token))
            assert again == first  # the same operation id and payload replays the answer
            assert first["task"]["metadata"]["cairn"]["state"] == "open"
            Task.objects.all().delete()  # room under the posting caps for the next id


def test_a_message_that_is_not_one_data_part_is_refused_with_what_to_send(
    rpc, http, poster, live_url, subtests
):
    """A generic client or an LLM saying "hello" learns how to use Cairn from the refusal."""
    for parts, described in (
        ([{"text": "hello"}], "1 part(s): text"),
        ([{"url": "https://github.com/a2aproject/a2a-js", "mediaType": "text/html"}], "file"),
        ([{"raw": "aGVsbG8=", "mediaType": "text/plain"}], "file"),
        ([{"data": open_task_payload()}, {"data": open_task_payload()}], "2 part(s): data, data"),
        ([{"data": open_task_payload()}, {"text": "please"}], "2 part(s): data, text"),
    ):
        with subtests.test(parts=parts):
            sent = {**message(open_task_payload()), "parts": parts}
            result = result_of(rpc("SendMessage", {"message": sent}, token=poster.token))
            error = refusal_of(result, "invalid_payload", sent_id=sent["messageId"])
            url = f"{live_url}/schemas/a2a/open-task-create.json"
            assert url in error["message"] and described in error["message"]
            assert "cairn.open_task/0.1" in error["message"] and "one data part" in error["message"]
            assert error["issues"] == [
                {"path": "", "code": "invalid_payload", "message": error["message"]}
            ]
            assert http.get(url).json()["$id"] == url
    assert Task.objects.count() == 0


def test_a_contribution_that_is_not_one_data_part_names_the_contribution_schema(
    rpc, live_url, poster, make_agent, post_task
):
    task = post_task(poster)
    contributor = make_agent()
    sent = {**message(contribution_payload(), task_id=str(task.pk)), "parts": [{"text": "yes"}]}

    result = result_of(rpc("SendMessage", {"message": sent}, token=contributor.token))

    error = refusal_of(result, "invalid_payload", task_id=str(task.pk))
    assert f"{live_url}/schemas/a2a/task-contribution.json" in error["message"]
    task.refresh_from_db()
    assert task.contributions_count == 0


def test_a_text_message_to_an_unknown_task_is_task_not_found(rpc, poster):
    sent = {**message({}, task_id=str(uuid.uuid4())), "parts": [{"text": "hello"}]}

    error_of(rpc("SendMessage", {"message": sent}, token=poster.token), -32001)


def test_a_configuration_that_is_not_an_object_is_invalid_params(rpc, poster, subtests):
    for params in (
        {"configuration": "x"},
        {"configuration": []},
        {"message": {**message(open_task_payload()), "parts": ["x"]}},
    ):
        with subtests.test(params=params):
            sent = {"message": message(open_task_payload()), **params}
            error = error_of(rpc("SendMessage", sent, token=poster.token), -32602)
            assert "must be an object" in error["message"]
    assert Task.objects.count() == 0
    taken = {"message": message(open_task_payload()), "configuration": {"returnImmediately": True}}
    assert "task" in result_of(rpc("SendMessage", taken, token=poster.token))


def test_the_endpoint_with_a_trailing_slash_is_the_same_endpoint(http, live_url, poster):
    """The 1.0 TCK and some clients append a slash to the card's URL."""
    sent = {
        "jsonrpc": "2.0",
        "id": "with-slash",
        "method": "SendMessage",
        "params": {"message": message(open_task_payload())},
    }
    posted = http.post(
        "/api/a2a/",
        content=json.dumps(sent).encode(),
        headers={**HEADERS, "Authorization": f"Bearer {poster.token}"},
    )
    task = result_of(posted)["task"]
    read = http.post(
        "/api/a2a/",
        content=json.dumps(
            {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task["id"]}}
        ).encode(),
        headers=HEADERS,
    )

    assert result_of(read)["id"] == task["id"]
    assert http.get("/api/a2a/").json()["name"] == "Cairn"
    unauthorized = http.post("/api/a2a/", content=json.dumps(sent).encode(), headers=HEADERS)
    assert unauthorized.status_code == 401


def test_the_card_may_be_cached_for_five_minutes(http, subtests):
    for path in ("/.well-known/agent-card.json", "/api/a2a", "/api/a2a/"):
        with subtests.test(path=path):
            card = http.get(path)
            assert card.headers["Cache-Control"] == "public, max-age=300"
            again = http.get(path, headers={"If-None-Match": card.headers["ETag"]})
            assert again.status_code == 304
            assert again.headers["Cache-Control"] == "public, max-age=300"


def test_a_client_that_appends_a_slash_to_the_card_url_lists_up_to_100(live_url):
    """The card's URL plus "/", and A2A's largest page size: a page of 50, said so."""
    with httpx.Client(base_url=live_url, timeout=20) as client:
        card = client.get("/.well-known/agent-card.json").json()
        url = card["supportedInterfaces"][0]["url"] + "/"
        body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"pageSize": 100}}
        result = result_of(client.post(url, json=body, headers={"A2A-Version": "1.0"}))
    assert result["pageSize"] == 50


def test_unrecognized_fields_and_the_extensions_header_are_ignored(rpc, poster):
    """A2A 1.0: a server ignores fields it does not know (forward compatibility), as the TCK's
    DM-SERIAL-005 and JSONRPC-SVC-002 send them."""
    sent = {**message(open_task_payload()), "tckUnknownField": "should-be-ignored"}

    result = result_of(
        rpc(
            "SendMessage",
            {"message": sent, "tckExtraParam": 42},
            token=poster.token,
            headers={"A2A-Extensions": "https://example.com/ext/v1,https://example.com/ext/v2"},
        )
    )

    assert result["task"]["status"]["state"] == "TASK_STATE_WORKING"


def test_each_a2a_error_carries_the_error_info_of_its_condition(rpc, poster, post_task, subtests):
    """A2A 1.0 §9.5: `error.data` is an array holding a google.rpc.ErrorInfo whose reason names
    the condition (what the TCK's JSONRPC error-info checks read)."""
    task = post_task(poster)
    for method, params, version, code, reason in (
        ("GetTask", {"id": str(uuid.uuid4())}, "1.0", -32001, "TASK_NOT_FOUND"),
        ("CancelTask", {"id": str(task.pk)}, "1.0", -32002, "TASK_NOT_CANCELABLE"),
        (
            "GetTaskPushNotificationConfig",
            {"taskId": str(task.pk), "id": "x"},
            "1.0",
            -32003,
            "PUSH_NOTIFICATION_NOT_SUPPORTED",
        ),
        ("GetExtendedAgentCard", {}, "1.0", -32004, "UNSUPPORTED_OPERATION"),
        ("GetTask", {"id": str(task.pk)}, "9.9", -32009, "VERSION_NOT_SUPPORTED"),
    ):
        with subtests.test(method=method, code=code):
            error = error_of(rpc(method, params, version=version), code)
            info = error["data"][0]
            assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
            assert (info["reason"], info["domain"]) == (reason, "a2a-protocol.org")
