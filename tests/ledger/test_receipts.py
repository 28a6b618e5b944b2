"""SPEC §15.1–15.2: the site's key is published, and every door's receipt is signed with it."""

from __future__ import annotations

import base64
import hashlib
import uuid

import pytest
import rfc8785
from joserfc.errors import BadSignatureError

from tests.factories import contribution_payload
from tests.ledger.conftest import receipt_verified, signed_payload


def test_the_jwks_publishes_one_ed25519_signing_key_named_by_its_thumbprint(http):
    response = http.get("/.well-known/jwks.json")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    (key,) = response.json()["keys"]
    assert (key["kty"], key["crv"], key["use"]) == ("OKP", "Ed25519", "sig")
    assert "d" not in key, "the private half must never be published"
    thumbprint = hashlib.sha256(
        rfc8785.dumps({"crv": key["crv"], "kty": key["kty"], "x": key["x"]})
    ).digest()
    assert key["kid"] == base64.urlsafe_b64encode(thumbprint).rstrip(b"=").decode()


def _contribute(http, agent, task_id, payload, key):
    return http.post(
        f"/api/a2a-tasks/{task_id}/contributions",
        json=payload,
        headers=agent.headers | {"Idempotency-Key": key},
    )


def test_an_http_receipt_is_signed_and_a_replay_repeats_its_exact_bytes(
    http, poster, post_task, make_agent
):
    task = post_task(poster)
    contributor = make_agent()
    payload = contribution_payload()

    first = _contribute(http, contributor, task.id, payload, "once")
    again = _contribute(http, contributor, task.id, payload, "once")

    assert first.status_code == again.status_code == 201
    receipt = first.json()["receipt"]
    receipt_verified(receipt, http)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["receipt"] == receipt
    mine = http.get("/api/a2a-tasks/mine", headers=contributor.headers).json()
    assert mine["contributions"][0]["receipt"] == receipt


def test_an_a2a_receipt_is_signed_and_a_replayed_message_repeats_it(
    http, poster, post_task, make_agent
):
    task = post_task(poster)
    contributor = make_agent()
    message_id = str(uuid.uuid4())
    envelope = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": message_id,
                "role": "ROLE_USER",
                "taskId": str(task.id),
                "parts": [{"data": contribution_payload()}],
            }
        },
    }
    headers = contributor.headers | {"A2A-Version": "1.0"}

    answers = [http.post("/api/a2a", json=envelope, headers=headers).json() for _ in range(2)]

    receipts = [a["result"]["task"]["metadata"]["cairn"]["contribution"] for a in answers]
    receipt_verified(receipts[0], http)
    assert receipts[0]["operation_id"] == message_id
    assert receipts[1] == receipts[0]


def test_a_tampered_receipt_no_longer_verifies(http, poster, post_task, make_agent, contribute):
    task = post_task(poster)
    receipt = contribute(make_agent(), task)["receipt"]
    tampered = {**receipt, "received_at": "2000-01-01T00:00:00.000Z"}

    header, _, signature = receipt["signature"].split(".")
    claims = {key: value for key, value in tampered.items() if key != "signature"}
    forged = base64.urlsafe_b64encode(rfc8785.dumps(claims)).rstrip(b"=").decode()

    receipt_verified(receipt, http)
    with pytest.raises(AssertionError):
        receipt_verified(tampered, http)
    with pytest.raises(BadSignatureError):
        signed_payload(f"{header}.{forged}.{signature}", http.get("/.well-known/jwks.json").json())
