"""SPEC §15.4: the Agent Card is signed with the site key, as A2A 1.0 prescribes, and says where
to verify Cairn; the SDK's own verifier accepts it and refuses a changed card."""

from __future__ import annotations

import base64
import copy
import json

import pytest
from a2a.client.card_resolver import parse_agent_card
from a2a.utils.signing import InvalidSignaturesError
from django.core.management import call_command
from django.core.management.base import CommandError

from ledger.keys import card_verifier
from ledger.notes import log_origin


def _protected(signature: dict) -> dict:
    raw = signature["protected"]
    return json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))


def test_the_served_card_is_signed_and_the_sdk_verifier_accepts_it(http, live_url):
    served = http.get("/.well-known/agent-card.json").json()

    (signature,) = served["signatures"]
    header = _protected(signature)
    assert header["alg"] == "EdDSA"
    assert header["jku"] == f"{live_url}/.well-known/jwks.json"
    jwks = http.get(header["jku"]).json()
    assert header["kid"] == jwks["keys"][0]["kid"]
    card_verifier(jwks)(parse_agent_card(copy.deepcopy(served)))


def test_a_changed_card_no_longer_verifies(http):
    served = http.get("/.well-known/agent-card.json").json()
    jwks = http.get("/.well-known/jwks.json").json()
    served["supportedInterfaces"][0]["url"] = "https://impostor.example/api/a2a"

    with pytest.raises(InvalidSignaturesError):
        card_verifier(jwks)(parse_agent_card(served))


def test_the_card_declares_the_verifiable_extension(http, live_url):
    served = http.get("/.well-known/agent-card.json").json()

    (extension,) = [
        e for e in served["capabilities"]["extensions"] if e["uri"] == "urn:cairn:verifiable:v1"
    ]
    assert extension.get("required", False) is False
    assert extension["params"] == {
        "jwks": f"{live_url}/.well-known/jwks.json",
        "checkpoint": f"{live_url}/api/log/checkpoint",
        "verifier": f"{live_url}/verify/cairn_verify.py",
        "max_merge_delay_s": 60,
        "witnesses": [],
        "witness_quorum": 0,
        "logs": [
            {
                "origin": log_origin(),
                "checkpoint": f"{live_url}/api/log/checkpoint",
                "tiles": f"{live_url}/api/log/tile/",
            }
        ],
    }
    assert http.get(extension["params"]["verifier"]).status_code == 200


def test_cairn_verify_checks_the_signature_of_a_served_card(http, live_url, tmp_path, capsys):
    call_command("card_check", url=live_url)
    assert "signature verifies" in capsys.readouterr().out

    served = http.get("/.well-known/agent-card.json").json()
    served["description"] = "A friendlier description, added by hand."
    path = tmp_path / "card.json"
    path.write_text(json.dumps(served))
    with pytest.raises(CommandError, match="no signature on the card verifies"):
        call_command("card_check", card=str(path))

    del served["signatures"]
    path.write_text(json.dumps(served))
    with pytest.raises(CommandError, match="the card carries no signature"):
        call_command("card_check", card=str(path))
