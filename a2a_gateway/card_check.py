"""Is the Agent Card, as served JSON, true to what the handler dispatches and the payload models
validate? It guards the day someone starts editing the card by hand."""

from __future__ import annotations

import json
from typing import Any

from a2a.types import AgentCard
from a2a.utils.signing import NoSignatureError, SignatureVerificationError
from google.protobuf.json_format import ParseDict, ParseError

from a2a_gateway.card import PAYLOADS_EXTENSION_URI, payload_schemas
from a2a_gateway.handler import CairnRequestHandler
from a2a_gateway.translate import ints_from_doubles
from ledger.keys import card_verifier

# The site only shapes URLs on the card, which the check does not judge.
CHECK_SITE = "http://cairn.invalid"


def _json_text(value: Any) -> str:
    """JSON values compared as text, so `true` is not `1`; the card's doubles read back as ints."""
    return json.dumps(ints_from_doubles(value), sort_keys=True, separators=(",", ":"))


def _skill_problems(card: dict[str, Any]) -> list[str]:
    dispatched = {operation.skill_id for operation in CairnRequestHandler.operations}
    skills = card.get("skills")
    if not isinstance(skills, list):
        return ["the card has no skills list"]
    problems = []
    seen: set[str | None] = set()
    for index, skill in enumerate(skills):
        if not isinstance(skill, dict):
            problems.append(f"skills[{index}] is not an object")
            continue
        skill_id = skill.get("id")
        name = repr(skill_id) if skill_id else f"skills[{index}]"
        if skill_id not in dispatched:
            problems.append(
                f"skill {name} is advertised but the gateway dispatches no SendMessage operation by that id "
                f"(it dispatches: {', '.join(sorted(dispatched))})"
            )
        if skill_id in seen:
            problems.append(f"skill {name} is advertised twice")
        seen.add(skill_id)
        description = skill.get("description")
        if not isinstance(description, str) or not description.strip():
            problems.append(f"skill {name} has no description")
        if not skill.get("tags"):
            problems.append(f"skill {name} has no tags")
    for skill_id in sorted(dispatched - seen):
        problems.append(f"the gateway dispatches {skill_id!r} but the card has no skill for it")
    return problems


def _schema_problems(card: dict[str, Any]) -> list[str]:
    capabilities = card.get("capabilities")
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    found = [
        e
        for e in extensions or []
        if isinstance(e, dict) and e.get("uri") == PAYLOADS_EXTENSION_URI
    ]
    if len(found) != 1:
        return [
            f"the card must declare the extension {PAYLOADS_EXTENSION_URI} exactly once (found {len(found)})"
        ]
    params = found[0].get("params")
    schemas = params.get("schemas") if isinstance(params, dict) else None
    if not isinstance(schemas, dict):
        return [f"the extension {PAYLOADS_EXTENSION_URI} has no params.schemas object"]
    problems = []
    models = {name: model for op in CairnRequestHandler.operations for name, model in op.payloads}
    expected = payload_schemas(CairnRequestHandler.operations)
    for name, schema in expected.items():
        if name not in schemas:
            problems.append(f"the extension has no schema for {name!r}")
        elif _json_text(schemas[name]) != _json_text(schema):
            problems.append(
                f"the extension's schema {name!r} differs from the schema of the payload model "
                f"{models[name].__module__}.{models[name].__name__}"
            )
    for name in sorted(set(schemas) - set(expected)):
        problems.append(f"the extension names a schema no SendMessage operation takes: {name!r}")
    return problems


def _signature_problems(card: dict[str, Any], jwks: dict[str, Any]) -> list[str]:
    try:
        parsed = ParseDict(card, AgentCard(), ignore_unknown_fields=True)
        card_verifier(jwks)(parsed)
    except NoSignatureError:
        return ["the card carries no signature (SPEC §15.4)"]
    except (SignatureVerificationError, ParseError) as error:
        return [f"no signature on the card verifies with the site's keys ({error})"]
    return []


def card_problems(card: Any, *, jwks: dict[str, Any] | None = None) -> list[str]:
    """What the card says that the code does not do; with `jwks`, a signature must verify too."""
    if not isinstance(card, dict):
        return ["the card is not a JSON object"]
    problems = _skill_problems(card) + _schema_problems(card)
    if jwks is not None:
        problems += _signature_problems(card, jwks)
    return problems
