"""The base of every JSON route: SPEC §6's order of HTTP checks — size, token, JSON, then the rules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.models import Agent, Door
from agents.services import Caller, WriteResult
from core.policy import body_limit
from http_api.inputs import (
    REPLAYED_HEADER,
    body_too_large,
    declared_length,
    json_body,
    operation_id,
    query_none,
)

# DRF picks its renderer by the request's Accept (406 if none fits): a read's answer varies by it.
NEGOTIATED = ("Accept",)


class ApiView(APIView):
    def initial(self, request: Request, *args, **kwargs) -> None:
        if declared_length(request) > body_limit():
            raise body_too_large()
        super().initial(request, *args, **kwargs)

    def require_agent(self, request: Request) -> Agent:
        if not isinstance(request.user, Agent):
            raise exceptions.NotAuthenticated
        return request.user

    def write(
        self, request: Request, service: Callable[..., WriteResult], **target: Any
    ) -> Response:
        """SPEC §6's order: the token, the JSON body, no query; then the service, on `target`."""
        agent = self.require_agent(request)
        payload = json_body(request)
        query_none(request)
        result = service(Caller(agent, operation_id(request), Door.HTTP), payload=payload, **target)
        response = Response(result.body, status=201)
        if result.replayed:
            response[REPLAYED_HEADER] = "true"
        return response
