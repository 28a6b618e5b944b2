"""SPEC §8.1: the Agent Card, derived from the code, and `card_check` that keeps it honest."""

from __future__ import annotations

import copy
import json

import pytest
from a2a.client.card_resolver import parse_agent_card
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types import AgentCard, GetExtendedAgentCardRequest
from django.core.management import call_command
from django.core.management.base import CommandError

from a2a_gateway.card import VERIFIABLE_EXTENSION_URI, agent_card_json
from a2a_gateway.card_check import CHECK_SITE
from core.payloads import model_schema
from tasks.payloads import ContributionPayload, OpenTaskPayload, SealedContributionPayload
from tests.a2a.conftest import as_json, run, sdk_client
from tests.keypers import keypers_configure, keypers_made


def test_the_card_is_served_at_the_well_known_path_and_at_the_endpoint(http, live_url):
    card = http.get("/.well-known/agent-card.json")
    endpoint = http.get("/api/a2a")

    assert card.status_code == endpoint.status_code == 200
    assert card.headers["content-type"] == "application/json"
    assert card.json() == endpoint.json()
    assert card.json()["supportedInterfaces"] == [
        {"url": f"{live_url}/api/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": f"{live_url}/api/a2a", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        {"url": "127.0.0.1:50051", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
        {"url": f"{live_url}/api/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
    ]


def test_the_card_lists_grpc_at_its_configured_address_and_not_when_it_is_off(http, settings):
    """SPEC §8.7: the gRPC server's address is `CAIRN_GRPC_URL` (behind a proxy it is not the
    bind address); with `CAIRN_GRPC_BIND` empty no gRPC server runs and the card lists none."""
    settings.CAIRN_GRPC_URL = "grpc.cairn.example:443"
    listed = http.get("/.well-known/agent-card.json").json()["supportedInterfaces"]
    assert [i for i in listed if i["protocolBinding"] == "GRPC"] == [
        {"url": "grpc.cairn.example:443", "protocolBinding": "GRPC", "protocolVersion": "1.0"}
    ]

    settings.CAIRN_GRPC_URL = ""
    served = http.get("/.well-known/agent-card.json").json()
    assert [
        (i["protocolBinding"], i["protocolVersion"]) for i in served["supportedInterfaces"]
    ] == [
        ("JSONRPC", "1.0"),
        ("HTTP+JSON", "1.0"),
        ("JSONRPC", "0.3"),
    ]
    assert "gRPC" not in served["description"]


def test_the_card_parses_into_the_sdk_agent_card_and_says_what_spec_8_1_says(http):
    served = http.get("/.well-known/agent-card.json").json()

    card = parse_agent_card(copy.deepcopy(served))
    assert isinstance(card, AgentCard)
    # Nothing but what the SDK's serialiser writes: the 1.0 card, and the 0.3 fields it adds.
    assert served == agent_card_to_dict(card)
    assert card.name == "Cairn" and card.version == "0.1.0"
    assert "GetTask" in card.description and "ListTasks" in card.description
    assert [
        (i.protocol_binding, i.protocol_version, i.tenant) for i in card.supported_interfaces
    ] == [
        ("JSONRPC", "1.0", ""),
        ("HTTP+JSON", "1.0", ""),
        ("GRPC", "1.0", ""),
        ("JSONRPC", "0.3", ""),
    ]
    assert not card.capabilities.streaming
    assert not card.capabilities.push_notifications
    assert not card.capabilities.extended_agent_card
    assert list(card.default_input_modes) == list(card.default_output_modes) == ["application/json"]
    scheme = card.security_schemes["bearer"].http_auth_security_scheme
    assert scheme.scheme == "Bearer"
    assert [list(r.schemes) for r in card.security_requirements] == [["bearer"]]
    assert served["securityRequirements"] == [{"schemes": {"bearer": {}}}]
    assert [skill.id for skill in card.skills] == ["cairn.post_task", "cairn.contribute"]
    for skill in card.skills:
        assert skill.name and skill.description and list(skill.tags)
    assert (served["url"], served["preferredTransport"], served["protocolVersion"]) == (
        card.supported_interfaces[3].url,
        "JSONRPC",
        "0.3",
    ), "the 0.3 fields, for a 0.3 client"


def _payload_schemas(http) -> dict:
    served = http.get("/.well-known/agent-card.json").json()
    extension, _verifiable = served["capabilities"]["extensions"]
    assert extension["uri"] == "urn:cairn:a2a:payloads:v1"
    assert extension.get("required", False) is False
    return as_json(extension["params"]["schemas"])


def test_the_extension_carries_the_schemas_of_the_payloads_the_site_accepts(http):
    """Without keypers the site refuses the sealed form (unknown_schema), so it is not offered."""
    assert _payload_schemas(http) == {
        "cairn.open_task/0.1": model_schema(OpenTaskPayload),
        "cairn.task.contribution/0.1": model_schema(ContributionPayload),
    }


def test_a_site_with_keypers_offers_the_sealed_contribution_too(http, settings):
    keypers_configure(settings, keypers_made(2), threshold=2)

    assert _payload_schemas(http) == {
        "cairn.open_task/0.1": model_schema(OpenTaskPayload),
        "cairn.task.contribution/0.1": model_schema(ContributionPayload),
        "cairn.task.contribution.sealed/0.1": model_schema(SealedContributionPayload),
    }


def test_the_card_names_the_configured_site(http, settings):
    settings.CAIRN_SITE_URL = "https://cairn.example"

    served = http.get("/api/a2a").json()

    assert served["supportedInterfaces"][0]["url"] == "https://cairn.example/api/a2a"


def test_the_card_follows_the_configured_witnesses(http, settings):
    """The built card is kept, but never past a change of the witnesses it lists (SPEC §15.4)."""

    def verifiable() -> dict:
        served = http.get("/.well-known/agent-card.json")
        extensions = served.json()["capabilities"]["extensions"]
        (found,) = [e for e in extensions if e["uri"] == VERIFIABLE_EXTENSION_URI]
        return {**found["params"], "etag": served.headers["ETag"]}

    before = verifiable()
    witness = {
        "name": "witness.example/w1",
        "key": "witness.example/w1+00000000+AA",
        "url": "https://witness.example",
    }
    settings.CAIRN_WITNESSES = [witness]
    settings.CAIRN_WITNESS_QUORUM = 1
    during = verifiable()
    settings.CAIRN_WITNESSES = []

    assert before["witnesses"] == [] and before["witness_quorum"] == 0
    assert during["witnesses"] == [witness] and during["witness_quorum"] == 1
    assert during["etag"] != before["etag"]
    assert verifiable() == before


def test_the_card_revalidates_with_its_etag(http):
    first = http.get("/.well-known/agent-card.json")

    again = http.get(
        "/.well-known/agent-card.json", headers={"If-None-Match": first.headers["ETag"]}
    )

    assert first.headers["ETag"].startswith('W/"')
    assert again.status_code == 304 and again.headers["ETag"] == first.headers["ETag"]


def test_if_none_match_compares_weakly_and_takes_a_list_or_a_star(http):
    etag = http.get("/.well-known/agent-card.json").headers["ETag"]

    def status(if_none_match: str) -> int:
        headers = {"If-None-Match": if_none_match}
        return http.get("/.well-known/agent-card.json", headers=headers).status_code

    assert status(etag.removeprefix("W/")) == 304
    assert status(f'W/"other", {etag}') == 304
    assert status("*") == 304
    assert status('W/"other"') == 200


def test_the_sdk_client_resolves_the_card(live_url):
    async def resolve():
        async with sdk_client(live_url) as client:
            # Without extendedAgentCard the SDK answers from the card it resolved, sending nothing.
            return await client.get_extended_agent_card(GetExtendedAgentCardRequest())

    card = run(resolve())

    assert [skill.id for skill in card.skills] == ["cairn.post_task", "cairn.contribute"]


# card_check and the system check -------------------------------------------------------------


def _write(tmp_path, card) -> str:
    path = tmp_path / "card.json"
    path.write_text(json.dumps(card))
    return str(path)


def test_cairn_verify_passes_on_the_real_card(capsys):
    call_command("card_check")

    assert "OK" in capsys.readouterr().out


def test_cairn_verify_passes_on_the_served_card(tmp_path, http):
    call_command(
        "card_check", card=_write(tmp_path, http.get("/.well-known/agent-card.json").json())
    )
    call_command("card_check", url=str(http.base_url))


def _doctored(change) -> dict:
    card = agent_card_json(CHECK_SITE)
    change(card)
    return card


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (
            lambda c: c["skills"].append({**c["skills"][0], "id": "cairn.cancel_task"}),
            "'cairn.cancel_task'",
        ),
        (lambda c: c["skills"][1].update(id="cairn.answer_call"), "'cairn.answer_call'"),
        (lambda c: c["skills"][0].pop("description"), "has no description"),
        (lambda c: c["skills"][1].update(description="  "), "has no description"),
        (
            lambda c: c["capabilities"]["extensions"][0]["params"]["schemas"][
                "cairn.open_task/0.1"
            ]["$defs"]["OpenTaskRequest"]["properties"]["title"].update(maxLength=1000),
            "'cairn.open_task/0.1' differs",
        ),
        (
            lambda c: c["capabilities"]["extensions"][0]["params"]["schemas"].pop(
                "cairn.task.contribution/0.1"
            ),
            "no schema for 'cairn.task.contribution/0.1'",
        ),
        (lambda c: c["capabilities"].pop("extensions"), "urn:cairn:a2a:payloads:v1"),
    ],
)
def test_cairn_verify_fails_on_a_doctored_card_naming_the_problem(tmp_path, change, named):
    path = _write(tmp_path, _doctored(change))

    with pytest.raises(CommandError) as failed:
        call_command("card_check", card=path)

    assert named in str(failed.value)
