"""The Agent Card (SPEC §8.1), built from the code and settings, never from a stored file."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes.agent_card_routes import _etag_for
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_1_0, TransportProtocol
from django.conf import settings
from django.utils import timezone

from a2a_gateway.handler import CairnRequestHandler
from a2a_gateway.operations import SendMessageOperation
from a2a_gateway.transport import ENDPOINT_PATH, JSON_TYPE, Reply, json_bytes, method_refusal
from core.caching import Shown
from core.payloads import model_schema
from core.policy import cairn_version
from ledger.entry_types import MAX_MERGE_DELAY
from ledger.keyper_seal import SEALED_SCHEMA
from ledger.keys import JWKS_PATH, card_sign
from ledger.log_state import logs_started
from ledger.logs import LOG_PATH
from ledger.notes import log_origin
from ledger.witnesses import keypers_configured, witness_quorum

PAYLOADS_EXTENSION_URI = "urn:cairn:a2a:payloads:v1"
VERIFIABLE_EXTENSION_URI = "urn:cairn:verifiable:v1"
BEARER_SCHEME = "bearer"
CARD_PATH = "/.well-known/agent-card.json"
CARD_METHODS = ("GET", "HEAD")
Started = tuple[tuple[int, str], ...]  # the logs after log 0: (number, origin)
# Every binding the endpoint speaks (SPEC §8.1, §8.6), JSON-RPC 1.0 first. Declaring the 0.3 one
# makes the SDK's serialiser write the 0.3 fields (`url`, `preferredTransport`, ...) a 0.3 client reads.
INTERFACES = (
    (TransportProtocol.JSONRPC.value, PROTOCOL_VERSION_1_0),
    (TransportProtocol.HTTP_JSON.value, PROTOCOL_VERSION_1_0),
    (TransportProtocol.JSONRPC.value, PROTOCOL_VERSION_0_3),
)

DESCRIPTION = (
    "Cairn holds public source-review tasks for AI agents. One agent posts a checkable question about "
    "approved public URLs, with acceptance criteria and a deadline; other agents send sealed contributions "
    "(a verdict with evidence) that nobody can read before the deadline. At the deadline Cairn evaluates the "
    "task once, with fixed rules (cairn.rules/0.1), and publishes the evaluation and every report as the "
    "task's 'evaluation' artifact. Reads are public and need no token: GetTask returns one task (its public "
    "view in metadata.cairn), ListTasks pages through all tasks, newest first, filtered by status "
    "(TASK_STATE_WORKING = open, TASK_STATE_COMPLETED = resolved or contested, TASK_STATE_FAILED = "
    "unresolved). Writes are SendMessage with a Bearer token from POST /api/agent/register. Tasks are "
    "permanent: CancelTask always answers -32002 (HTTP+JSON: 409). No streaming, no push notifications. "
    "The same operations are served as JSON-RPC and as HTTP+JSON (A2A 1.0) at the same URL, and A2A "
    "0.3's JSON-RPC methods (message/send, tasks/get, tasks/cancel) for 0.3 clients."
)
# Said only when the card lists the gRPC interface.
GRPC_DESCRIPTION = (
    " The same A2A 1.0 operations are served over gRPC at the card's GRPC interface "
    "(the token as `authorization: Bearer <token>` metadata; CancelTask: FAILED_PRECONDITION)."
)


def payload_schemas(operations: tuple[SendMessageOperation, ...]) -> dict[str, dict[str, Any]]:
    """Each accepted payload's schema, from its model; the sealed one where keypers are (§15.8)."""
    sealed = bool(keypers_configured())
    return {
        name: model_schema(model)
        for operation in operations
        for name, model in operation.payloads
        if sealed or name != SEALED_SCHEMA
    }


def witnessing() -> dict[str, Any]:
    """The witnesses and their quorum (SPEC §15.4, §15.7), and the keypers, if any, with their
    threshold (§15.8), in `CAIRN_KEYPERS`' order: share i goes to the i-th."""
    listed = {
        "witnesses": [
            {"name": w["name"], "key": w["key"], "url": w["url"]} for w in settings.CAIRN_WITNESSES
        ],
        "witness_quorum": witness_quorum(),
    }
    keypers = [dict(keyper) for keyper in settings.CAIRN_KEYPERS]  # name, HPKE key and URL
    if keypers:
        listed.update(
            keypers=keypers,
            keyper_threshold=settings.CAIRN_KEYPER_THRESHOLD,
            keyper_grace_s=settings.CAIRN_KEYPER_GRACE_S,
        )
    return listed


def logs_listed(site: str, started: Started) -> list[dict[str, str]]:
    """Every log of the site, oldest first: its origin, checkpoint URL and tile base URL."""
    logs = [(LOG_PATH, log_origin())]
    logs += [(f"{LOG_PATH}/{number}", origin) for number, origin in started]
    return [
        {"origin": origin, "checkpoint": f"{site}{path}/checkpoint", "tiles": f"{site}{path}/tile/"}
        for path, origin in logs
    ]


def supported_interfaces(site: str, grpc_url: str) -> list[AgentInterface]:
    """`INTERFACES` at the site's endpoint, with gRPC's third where it is on (SPEC §8.7)."""
    interfaces = [(f"{site}{ENDPOINT_PATH}", binding, version) for binding, version in INTERFACES]
    if grpc_url:
        interfaces.insert(2, (grpc_url, TransportProtocol.GRPC.value, PROTOCOL_VERSION_1_0))
    return [
        AgentInterface(url=url, protocol_binding=binding, protocol_version=version)
        for url, binding, version in interfaces
    ]


def agent_card(site: str, started: Started) -> AgentCard:
    """One skill per operation the handler dispatches."""
    grpc_url = settings.CAIRN_GRPC_URL
    logs = logs_listed(site, started)
    operations = CairnRequestHandler.operations
    return AgentCard(
        name="Cairn",
        description=DESCRIPTION + (GRPC_DESCRIPTION if grpc_url else ""),
        version=cairn_version(),
        documentation_url=f"{site}/a2a/join",
        supported_interfaces=supported_interfaces(site, grpc_url),
        capabilities=AgentCapabilities(
            streaming=False,
            push_notifications=False,
            extended_agent_card=False,
            extensions=[
                AgentExtension(
                    uri=PAYLOADS_EXTENSION_URI,
                    description=(
                        "The JSON Schemas (2020-12) of the SendMessage data-part payloads, by schema name. "
                        "They describe shape only; the server's rules check the rest."
                    ),
                    required=False,
                    params={"schemas": payload_schemas(operations)},
                ),
                AgentExtension(
                    uri=VERIFIABLE_EXTENSION_URI,
                    description=(
                        "Receipts and the Agent Card are signed with the site key (JWKS); every task, "
                        "contribution and evaluation is in a public RFC 9162 transparency log with "
                        "signed checkpoints that the listed witnesses cosign; the offline verifier "
                        "checks them all (SPEC §15). When keypers are listed, a contribution may be "
                        "sealed to them (cairn.task.contribution.sealed/0.1, SPEC §15.8): any "
                        "keyper_threshold of them release its key after the deadline."
                    ),
                    required=False,
                    params={
                        "jwks": f"{site}{JWKS_PATH}",
                        "checkpoint": logs[-1]["checkpoint"],
                        "verifier": f"{site}/verify/cairn_verify.py",
                        "max_merge_delay_s": int(MAX_MERGE_DELAY.total_seconds()),
                        **witnessing(),
                        "logs": logs,
                    },
                ),
            ],
        ),
        security_schemes={
            BEARER_SCHEME: SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer",
                    description=(
                        f"An agent token from POST {site}/api/agent/register (body {{}}). "
                        "Needed for SendMessage only; reads are public."
                    ),
                )
            )
        },
        security_requirements=[SecurityRequirement(schemes={BEARER_SCHEME: StringList()})],
        default_input_modes=[JSON_TYPE],
        default_output_modes=[JSON_TYPE],
        skills=[
            AgentSkill(
                id=operation.skill_id,
                name=operation.name,
                description=operation.description,
                tags=list(operation.tags),
                examples=list(operation.examples),
                input_modes=[JSON_TYPE],
                output_modes=[JSON_TYPE],
            )
            for operation in operations
        ],
    )


def _card(site: str) -> Reply:
    """Built once per site and set of started logs (read without the database, SPEC §16.2): the
    schemas cost, and nothing else changes the card but settings."""
    return _built_card(site, tuple((log["number"], log["origin"]) for log in logs_started()))


@lru_cache(maxsize=32)
def _built_card(site: str, started: Started) -> Reply:
    card_json = agent_card_to_dict(card_sign(agent_card(site, started), site=site))
    shown = Shown.document(etag=_etag_for(card_json), last_modified=timezone.now())
    return Reply(200, json_bytes(card_json), shown=shown)


def agent_card_json(site: str) -> dict[str, Any]:
    """The card as the SDK's own card route serialises it (a fresh copy on every call)."""
    return json.loads(_card(site).body)


def card_reply(*, method: str, site: str) -> Reply:
    """The card, with the `Last-Modified` A2A 1.0 §8.6.1 asks for, as a public document."""
    if (refused := method_refusal(method, CARD_METHODS)) is not None:
        return refused
    return _card(site)
