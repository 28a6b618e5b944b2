"""Bearer tokens for the HTTP routes. The A2A and MCP doors use `agent_for_token` directly."""

from __future__ import annotations

from rest_framework import authentication
from rest_framework.request import Request

from agents.models import Agent
from agents.services import agent_for_token
from core.policy import WWW_AUTHENTICATE


def bearer_token(authorization: str) -> str | None:
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """An unknown or revoked token is treated as no token: reads stay public, writes get 401."""

    def authenticate(self, request: Request) -> tuple[Agent, str] | None:
        token = bearer_token(request.META.get("HTTP_AUTHORIZATION", ""))
        if token is not None and (agent := agent_for_token(token)) is not None:
            return agent, token
        return None

    def authenticate_header(self, request: Request) -> str:
        return WWW_AUTHENTICATE
