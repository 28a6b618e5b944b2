"""SPEC §15.8 on the A2A bindings: a report sealed to the site's keypers is a contribution like
any other, sent as the one data part of a SendMessage over JSON-RPC (raw, and the official
a2a-sdk client), HTTP+JSON and A2A 0.3 (raw, and the 0.3 client), and answered with the Task
carrying the keypers receipt; refused as the plain form is; and the card lists the keypers."""

from __future__ import annotations

import copy
import json
import subprocess
import uuid
from pathlib import Path

import pytest
from a2a.client.card_resolver import parse_agent_card
from a2a.types import Message, Task, TaskState
from google.protobuf.json_format import MessageToDict

from a2a_gateway.card import PAYLOADS_EXTENSION_URI, VERIFIABLE_EXTENSION_URI
from a2a_gateway.card_check import card_problems
from core.payloads import model_schema
from ledger.keys import card_verifier
from tasks.models import Contribution
from tasks.models import Task as TaskRow
from tasks.payloads import SealedContributionPayload
from tests.a2a import clients
from tests.a2a.conftest import (
    as_json,
    error_of,
    message,
    refusal_of,
    result_of,
    run,
    sdk_client,
    sdk_send,
    wait_past,
)
from tests.a2a.test_rest_clients import rest_client
from tests.a2a.test_v0_3 import message03, rpc03
from tests.factories import contribution_payload, deadline_in, open_task_payload, open_task_request
from tests.keypers import SiteKeyper, keypers_configure, keypers_made, sealed_payload
from tests.ledger.conftest import receipt_verified

HERE = Path(__file__).parent
THRESHOLD = 2


@pytest.fixture
def keypers(settings) -> list[SiteKeyper]:
    made = keypers_made(3)
    keypers_configure(settings, made, THRESHOLD)
    return made


def _keyper_receipt(receipt: dict, payload: dict, task_id: str, operation_id: str) -> None:
    """The receipt §15.8 gives a keyper-sealed contribution, for this payload and message."""
    assert set(receipt) == {
        "contribution_id",
        "task_id",
        "operation_id",
        "commitment",
        "ciphertext_digest",
        "sealed",
        "received_at",
        "sealed_until",
        "signature",
    }
    assert (receipt["task_id"], receipt["operation_id"]) == (task_id, operation_id)
    assert (receipt["commitment"], receipt["sealed"]) == (payload["commitment"], "keypers")
    row = Contribution.objects.get(id=receipt["contribution_id"])
    assert row.keyper_seal["commitment"] == payload["commitment"]
    assert row.keyper_seal["ciphertext_digest"] == receipt["ciphertext_digest"]
    assert row.sealed_report is None and row.report_digest == "" and row.salt == ""


def test_json_rpc_takes_a_sealed_contribution_and_replays_its_receipt(
    http, rpc, keypers, poster, post_task, make_agent
):
    task = post_task(poster)
    payload = sealed_payload(task, keypers, THRESHOLD)
    contributor, message_id = make_agent(), str(uuid.uuid4())
    sent = {"message": message(payload, task_id=str(task.pk), message_id=message_id)}

    first = result_of(rpc("SendMessage", sent, token=contributor.token))
    again = result_of(rpc("SendMessage", sent, token=contributor.token))

    answer = first["task"]
    assert answer["id"] == str(task.pk) and answer["status"]["state"] == "TASK_STATE_WORKING"
    cairn = as_json(answer["metadata"]["cairn"])
    assert cairn["contributions_received"] == 1
    receipt = cairn["contribution"]
    _keyper_receipt(receipt, payload, str(task.pk), message_id)
    receipt_verified(receipt, http)
    assert again == first
    assert Contribution.objects.count() == 1
    assert TaskRow.objects.get(pk=task.pk).keys_pending is True


def test_json_rpc_refuses_a_sealed_contribution_as_it_refuses_a_plain_one(
    http, rpc, keypers, poster, post_task, make_agent, short_deadlines
):
    task = post_task(poster)
    payload = sealed_payload(task, keypers, THRESHOLD)
    task_id = str(task.pk)

    own = result_of(
        rpc("SendMessage", {"message": message(payload, task_id=task_id)}, token=poster.token)
    )
    shuffled = copy.deepcopy(payload)
    shuffled["shares"].reverse()
    envelope = result_of(
        rpc(
            "SendMessage",
            {"message": message(shuffled, task_id=task_id)},
            token=make_agent().token,
        )
    )
    closing = post_task(
        make_agent(), open_task_payload(open_task_request(deadline=deadline_in(1.5)))
    )
    late = sealed_payload(closing, keypers, THRESHOLD)
    wait_past(closing.deadline_text)
    closed = rpc(
        "SendMessage",
        {"message": message(late, task_id=str(closing.pk))},
        token=make_agent().token,
    )

    refusal_of(own, "own_task", task_id=task_id)
    error = refusal_of(envelope, "invalid_payload", task_id=task_id)
    assert {issue["path"] for issue in error["issues"]} == {
        "shares[0].keyper",
        "shares[0].index",
        "shares[2].keyper",
        "shares[2].index",
    }
    assert error_of(closed, -32004)["data"][0]["metadata"] == {"code": "task_closed"}
    assert Contribution.objects.count() == 0


def test_the_python_sdk_sends_a_sealed_contribution_over_json_rpc(
    live_url, http, keypers, poster, post_task, make_agent
):
    task = post_task(poster)
    payload = sealed_payload(task, keypers, THRESHOLD)
    message_id, token = str(uuid.uuid4()), make_agent().token

    async def scenario() -> Task | Message:
        async with sdk_client(live_url, token) as client:
            return await sdk_send(client, payload, task_id=str(task.pk), message_id=message_id)

    answer = run(scenario())

    assert isinstance(answer, Task) and answer.status.state == TaskState.TASK_STATE_WORKING
    receipt = as_json(MessageToDict(answer.metadata))["cairn"]["contribution"]
    _keyper_receipt(receipt, payload, str(task.pk), message_id)
    receipt_verified(receipt, http)


def test_the_python_sdk_sends_a_sealed_contribution_over_http_json(
    live_url, http, keypers, poster, post_task, make_agent
):
    task = post_task(poster)
    payload = sealed_payload(task, keypers, THRESHOLD)
    message_id, token = str(uuid.uuid4()), make_agent().token
    requests: list[str] = []

    async def scenario() -> Task | Message:
        async with rest_client(live_url, requests, token) as client:
            return await sdk_send(client, payload, task_id=str(task.pk), message_id=message_id)

    answer = run(scenario())

    assert isinstance(answer, Task), answer
    receipt = as_json(MessageToDict(answer.metadata))["cairn"]["contribution"]
    _keyper_receipt(receipt, payload, str(task.pk), message_id)
    receipt_verified(receipt, http)
    assert "POST /api/a2a/message:send" in requests


def test_a_0_3_message_carries_a_sealed_contribution(http, keypers, poster, post_task, make_agent):
    task = post_task(poster)
    payload = sealed_payload(task, keypers, THRESHOLD)
    message_id = str(uuid.uuid4())
    sent = {"message": message03(payload, task_id=str(task.pk), message_id=message_id)}

    answer = result_of(rpc03(http, "message/send", sent, token=make_agent().token))

    assert answer["kind"] == "task" and answer["status"]["state"] == "working"
    receipt = as_json(answer["metadata"]["cairn"]["contribution"])
    _keyper_receipt(receipt, payload, str(task.pk), message_id)
    receipt_verified(receipt, http)


@pytest.fixture(scope="module")
def python_0_3() -> Path:
    try:
        return clients.python_0_3()
    except clients.Unavailable as unavailable:
        pytest.skip(str(unavailable))


def test_the_0_3_python_sdk_sends_a_sealed_contribution(
    python_0_3, live_url, http, keypers, poster, post_task, make_agent
):
    task = post_task(poster)
    payload = sealed_payload(task, keypers, THRESHOLD)
    flow = {"base": live_url, "token": make_agent().token, "taskId": str(task.pk), "data": payload}

    ran = subprocess.run(
        [str(python_0_3), str(HERE / "v0_3" / "send_one.py")],
        input=json.dumps(flow).encode(),
        capture_output=True,
        check=False,
        timeout=120,
    )

    assert ran.returncode == 0, ran.stderr.decode()
    answer = json.loads(ran.stdout)
    assert answer["kind"] == "task", answer
    receipt = as_json(answer["metadata"]["cairn"]["contribution"])
    _keyper_receipt(receipt, payload, str(task.pk), answer["sentMessageId"])
    receipt_verified(receipt, http)


# The card -------------------------------------------------------------------------------------


def _verifiable(card: dict) -> dict:
    (found,) = [
        e for e in card["capabilities"]["extensions"] if e["uri"] == VERIFIABLE_EXTENSION_URI
    ]
    return found["params"]


def test_the_card_lists_the_keypers_in_order_with_their_threshold(http, settings):
    before = http.get("/.well-known/agent-card.json")
    made = keypers_made(3)
    keypers_configure(settings, made, THRESHOLD)

    served = http.get("/.well-known/agent-card.json")

    assert "keypers" not in _verifiable(before.json())
    assert "keyper_threshold" not in _verifiable(before.json())
    params = _verifiable(served.json())
    assert params["keypers"] == [
        {"name": k.name, "hpke_key": k.keyper.hpke_key, "url": k.url} for k in made
    ]
    assert as_json(params["keyper_threshold"]) == THRESHOLD
    assert as_json(params["keyper_grace_s"]) == settings.CAIRN_KEYPER_GRACE_S
    assert served.headers["ETag"] != before.headers["ETag"]
    card = served.json()
    assert card_problems(card, jwks=http.get("/.well-known/jwks.json").json()) == []
    card_verifier(http.get("/.well-known/jwks.json").json())(parse_agent_card(copy.deepcopy(card)))


def test_the_card_publishes_the_sealed_schema_and_says_either_form_is_taken(http, settings):
    keypers_configure(settings, keypers_made(3), THRESHOLD)
    card = http.get("/.well-known/agent-card.json").json()

    (payloads,) = [
        e for e in card["capabilities"]["extensions"] if e["uri"] == PAYLOADS_EXTENSION_URI
    ]
    schema = as_json(payloads["params"]["schemas"]["cairn.task.contribution.sealed/0.1"])
    assert schema == model_schema(SealedContributionPayload)
    (contribute,) = [skill for skill in card["skills"] if skill["id"] == "cairn.contribute"]
    assert "cairn.task.contribution/0.1" in contribute["description"]
    assert "cairn.task.contribution.sealed/0.1" in contribute["description"]
    assert (
        http.get("/schemas/a2a/task-contribution-sealed.json")
        .json()["$id"]
        .endswith("/schemas/a2a/task-contribution-sealed.json")
    )


def test_a_site_without_keypers_refuses_a_sealed_data_part_with_unknown_schema(
    http, rpc, poster, post_task, make_agent
):
    card = http.get("/.well-known/agent-card.json").json()
    (payloads,) = [
        e for e in card["capabilities"]["extensions"] if e["uri"] == PAYLOADS_EXTENSION_URI
    ]
    assert "cairn.task.contribution.sealed/0.1" not in payloads["params"]["schemas"]
    task = post_task(poster)
    payload = sealed_payload(task, keypers_made(3), THRESHOLD)

    answer = result_of(
        rpc(
            "SendMessage",
            {"message": message(payload, task_id=str(task.pk))},
            token=make_agent().token,
        )
    )

    error = refusal_of(answer, "unknown_schema", task_id=str(task.pk))
    assert "lists no keypers" in error["message"]
    plain = rpc(
        "SendMessage",
        {"message": message(contribution_payload(), task_id=str(task.pk))},
        token=make_agent().token,
    )
    assert "report_digest" in as_json(result_of(plain)["task"]["metadata"]["cairn"]["contribution"])
