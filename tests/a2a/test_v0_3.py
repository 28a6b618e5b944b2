"""SPEC §8.6: A2A 0.3 JSON-RPC on `POST /api/a2a`, over raw HTTP: the 0.3 methods, messages,
Tasks and errors, the version rules, and the card's 0.3 fields beside a signature that still
verifies."""

from __future__ import annotations

import copy
import itertools
import uuid
from typing import Any

import httpx
from a2a.client.card_resolver import parse_agent_card

from ledger.keys import card_verifier
from tests.a2a.conftest import assert_unauthorized, error_of, result_of, wait_past
from tests.factories import contribution_payload, deadline_in, open_task_payload, open_task_request

_ids = itertools.count(1)


def rpc03(
    http: httpx.Client,
    method: str,
    params: Any,
    *,
    token: str | None = None,
    version: str | None = None,
) -> httpx.Response:
    """One 0.3 request as a 0.3 client sends it: no A2A-Version header unless asked."""
    headers = {"Content-Type": "application/json"}
    if version is not None:
        headers["A2A-Version"] = version
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    envelope = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}
    return http.post("/api/a2a", json=envelope, headers=headers)


def message03(payload: Any, *, task_id: str | None = None, message_id: str | None = None) -> dict:
    sent: dict[str, Any] = {
        "kind": "message",
        "messageId": message_id or str(uuid.uuid4()),
        "role": "user",
        "parts": [{"kind": "data", "data": payload}],
    }
    if task_id:
        sent["taskId"] = task_id
    return sent


def send03(http, payload: Any, *, token: str, task_id: str | None = None) -> httpx.Response:
    return rpc03(
        http, "message/send", {"message": message03(payload, task_id=task_id)}, token=token
    )


def test_a_0_3_client_posts_contributes_and_reads_0_3_tasks(http, rpc, poster, make_agent):
    posted = result_of(send03(http, open_task_payload(), token=poster.token))

    assert posted["kind"] == "task" and posted["status"]["state"] == "working"
    assert posted["id"] == posted["contextId"]
    contributed = result_of(
        send03(http, contribution_payload(), token=make_agent().token, task_id=posted["id"])
    )
    assert contributed["metadata"]["cairn"]["contributions_received"] == 1
    assert "contribution_id" in contributed["metadata"]["cairn"]["contribution"]
    got = result_of(rpc03(http, "tasks/get", {"id": posted["id"]}))
    assert got["kind"] == "task" and got["metadata"]["cairn"]["contributions_received"] == 1
    current = result_of(rpc("GetTask", {"id": posted["id"]}))
    assert got["metadata"]["cairn"] == current["metadata"]["cairn"]


def test_a_refusal_is_a_0_3_agent_message(http, poster):
    refused = open_task_payload(open_task_request(sources=["https://example.com/not-allowed"]))

    answer = result_of(send03(http, refused, token=poster.token))

    assert answer["kind"] == "message" and answer["role"] == "agent"
    assert answer["metadata"] == {"cairn": {"accepted": False}}
    (part,) = answer["parts"]
    assert part["kind"] == "data" and part["data"]["error"]["code"] == "source_not_allowed"
    text = {**message03(None), "parts": [{"kind": "text", "text": "hello"}]}
    hello = result_of(rpc03(http, "message/send", {"message": text}, token=poster.token))
    assert hello["parts"][0]["data"]["error"]["code"] == "invalid_payload"


def test_the_0_3_errors(http, poster, make_agent, post_task, settings, subtests):
    task_id = str(post_task(poster).pk)
    missing = str(uuid.uuid4())
    for method, params, code in (
        ("tasks/get", {"id": missing}, -32001),
        ("tasks/cancel", {"id": task_id}, -32002),
        ("tasks/cancel", {"id": missing}, -32001),
        ("message/stream", {"message": message03(open_task_payload())}, -32004),
        ("tasks/resubscribe", {"id": task_id}, -32004),
        ("tasks/pushNotificationConfig/get", {"id": task_id}, -32003),
        ("tasks/pushNotificationConfig/list", {"id": task_id}, -32003),
        ("agent/getAuthenticatedExtendedCard", {}, -32004),
        ("tasks/list", {}, -32601),  # not a 0.3 method
        ("tasks/get", {"nothing": 1}, -32600),  # the SDK's 0.3 adapter answers a bad shape so
    ):
        with subtests.test(method=method, params=params):
            error_of(rpc03(http, method, params), code)
    error_of(send03(http, contribution_payload(), token=poster.token, task_id=missing), -32001)
    settings.CAIRN_TASK_DEADLINE_MIN_S = 1
    deadline = deadline_in(1.2)
    closed = str(post_task(poster, open_task_payload(open_task_request(deadline=deadline))).pk)
    wait_past(deadline)
    error_of(send03(http, contribution_payload(), token=make_agent().token, task_id=closed), -32004)


def test_message_send_needs_a_token(http):
    answer = send03(http, open_task_payload(), token="cairn_not-a-token")

    assert_unauthorized(answer)


def test_a_0_3_method_is_served_without_a_version_or_with_0_3_and_refused_with_another(
    http, poster, post_task, subtests
):
    task_id = str(post_task(poster).pk)
    for version in (None, "0.3", "0.3.0"):
        with subtests.test(version=version):
            assert (
                result_of(rpc03(http, "tasks/get", {"id": task_id}, version=version))["id"]
                == task_id
            )
    for version in ("1.0", "2", "banana"):
        with subtests.test(version=version):
            error_of(rpc03(http, "tasks/get", {"id": task_id}, version=version), -32009)
            error_of(rpc03(http, "message/stream", {}, version=version), -32009)
    error_of(rpc03(http, "GetTask", {"id": task_id}, version="0.3"), -32009)


def test_the_card_carries_the_0_3_fields_and_its_1_0_signature_verifies(http, live_url):
    served = http.get("/.well-known/agent-card.json").json()
    jwks = http.get("/.well-known/jwks.json").json()

    assert served["url"] == f"{live_url}/api/a2a"
    assert (served["preferredTransport"], served["protocolVersion"]) == ("JSONRPC", "0.3")
    assert served["supportedInterfaces"][-1] == {
        "url": f"{live_url}/api/a2a",
        "protocolBinding": "JSONRPC",
        "protocolVersion": "0.3",
    }
    assert served["security"] == [{"bearer": []}]
    card_verifier(jwks)(parse_agent_card(copy.deepcopy(served)))
