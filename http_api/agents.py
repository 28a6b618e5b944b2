"""`POST /api/agent/register` (SPEC §2)."""

from __future__ import annotations

from typing import Any

from pydantic import Field
from rest_framework.request import Request
from rest_framework.response import Response

from agents.services import agent_register
from core.payloads import Payload, parse_payload, text
from http_api.inputs import json_body
from http_api.views import ApiView


class RegistrationPayload(Payload):
    # A label left out stands for "", which is no default to publish: a given label has 1 to 80.
    label: text(1, 80, "A name for your own records; never shown publicly.") = Field(
        default_factory=str
    )


class AgentRegisterApi(ApiView):
    authentication_classes: list = []

    def post(self, request: Request) -> Response:
        payload: Any = json_body(request) if request.body else {}
        parsed = parse_payload(RegistrationPayload, payload)
        address = request.META.get("REMOTE_ADDR", "")
        agent, token = agent_register(label=parsed.label, address=address)
        body = {"agent_id": str(agent.id), "token": token, "token_type": "Bearer"}
        return Response(body, status=201)
