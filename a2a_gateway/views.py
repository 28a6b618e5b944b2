"""Django adapts; the SDK speaks A2A. The views only move bytes and headers to and from the SDK's
JSON-RPC dispatcher, plus the two checks the SDK cannot place where SPEC §8.2 wants them: the
Bearer token of SendMessage (HTTP 401, before the version) and the version (before the params)."""

from __future__ import annotations

import json
from typing import Any

from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.jsonrpc_models import JSONParseError
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.server.routes.agent_card_routes import (
    _etag_for,
    _if_none_match_hits,
)  # the SDK card route's ETag
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import InvalidRequestError
from a2a.utils.constants import PROTOCOL_VERSION_1_0
from a2a.utils.errors import A2AError
from a2a.utils.version_validator import validate_version
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.views.decorators.csrf import csrf_exempt
from jsonrpc.exceptions import JSONRPCException
from jsonrpc.jsonrpc2 import JSONRPC20Request
from starlette.requests import Request as StarletteRequest

from a2a_gateway.card import agent_card_json, site_url
from a2a_gateway.handler import AGENT_STATE, RAW_PARAMS_STATE, CairnRequestHandler
from agents.auth import REALM, bearer_token
from agents.models import Agent
from agents.services import agent_for_token

AUTHENTICATED_METHODS = frozenset({"SendMessage"})
_AGENT_SCOPE = "cairn.agent"
_PARAMS_SCOPE = "cairn.params"


class AgentUser(User):
    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return str(self.agent.pk)


class CairnContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's context (it keeps the headers its version check reads), plus the agent and raw params."""

    def build(self, request: StarletteRequest) -> ServerCallContext:
        context = super().build(request)
        agent = request.scope.get(_AGENT_SCOPE)
        if agent is not None:
            context.user = AgentUser(agent)
            context.state[AGENT_STATE] = agent
        context.state[RAW_PARAMS_STATE] = request.scope.get(_PARAMS_SCOPE)
        return context


DISPATCHER = JsonRpcDispatcher(CairnRequestHandler(), context_builder=CairnContextBuilder())


def _json_response(payload: dict[str, Any], status: int = 200) -> HttpResponse:
    body = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return HttpResponse(body.encode("utf-8"), status=status, content_type="application/json")


def _error(request_id: Any, error: A2AError | JSONParseError, status: int = 200) -> HttpResponse:
    return _json_response(build_error_response(request_id, error), status)


def _body(request: HttpRequest) -> bytes | None:
    """The body, or None when it is over the limit (read no further, parse nothing)."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    try:
        if int(request.META.get("CONTENT_LENGTH") or 0) > limit:
            return None
    except ValueError:
        pass
    try:
        body = request.body
    except RequestDataTooBig:
        return None
    return None if len(body) > limit else body


def _single_request(document: Any) -> tuple[Any, str] | None:
    """(id, method) of a well-formed single request for a method the SDK routes, else None:
    everything else goes to the dispatcher untouched, which answers it as the SDK does."""
    if not isinstance(document, dict) or document.get("jsonrpc") != "2.0":
        return None
    request_id = document.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int | None):
        return None
    try:
        parsed = JSONRPC20Request.from_data(document)
    except (JSONRPCException, ValueError, TypeError):
        return None
    if (
        not isinstance(parsed, JSONRPC20Request)
        or parsed.method not in JsonRpcDispatcher.METHOD_TO_MODEL
    ):
        return None
    return request_id, parsed.method


@validate_version(PROTOCOL_VERSION_1_0)
async def _speaks_a2a_1(context: ServerCallContext) -> None:
    """The SDK's own version rule (a missing A2A-Version means 0.3), checked before the params."""


def _starlette_request(
    request: HttpRequest, body: bytes, agent: Agent | None, params: Any
) -> StarletteRequest:
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    scope = {
        "type": "http",
        "method": "POST",
        "path": request.path,
        "query_string": b"",
        "headers": [
            (key.lower().encode("latin-1"), value.encode("latin-1"))
            for key, value in request.headers.items()
        ],
        _AGENT_SCOPE: agent,
        _PARAMS_SCOPE: params,
    }
    return StarletteRequest(scope, receive)


def agent_card(request: HttpRequest) -> HttpResponse:
    """`GET /.well-known/agent-card.json` (and `GET /api/a2a`): the card, served as the SDK's card route does."""
    if request.method not in ("GET", "HEAD"):
        return HttpResponseNotAllowed(["GET", "HEAD"])
    card = agent_card_json(site_url(request))
    etag = _etag_for(card)
    if_none_match = request.headers.get("If-None-Match")
    if if_none_match and _if_none_match_hits(if_none_match, etag):
        response = HttpResponse(status=304)
    else:
        response = _json_response(card)
    response["ETag"] = etag
    return response


@csrf_exempt
async def a2a_endpoint(request: HttpRequest) -> HttpResponse:
    """`POST /api/a2a`: A2A 1.0 JSON-RPC. `GET` answers with the card: the endpoint documents itself."""
    if request.method in ("GET", "HEAD"):
        return agent_card(request)
    if request.method != "POST":
        return HttpResponseNotAllowed(["GET", "HEAD", "POST"])

    body = _body(request)
    if body is None:
        return _error(None, InvalidRequestError(message="Payload too large: the limit is 256 KiB"))
    try:
        document = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        return _error(None, JSONParseError(message="the body is not UTF-8"))
    except ValueError:
        document = None  # the dispatcher answers -32700 with the parser's message

    agent = None
    envelope = _single_request(document)
    if envelope is not None:
        request_id, method = envelope
        if method in AUTHENTICATED_METHODS:
            token = bearer_token(request.headers.get("Authorization", ""))
            agent = await sync_to_async(agent_for_token)(token) if token else None
            if agent is None:
                response = _error(
                    request_id,
                    InvalidRequestError(
                        message=f"a valid Bearer token is required for {method} (POST /api/agent/register issues one)"
                    ),
                    status=401,
                )
                response["WWW-Authenticate"] = REALM
                return response
        headers = {key.lower(): value for key, value in request.headers.items()}
        try:
            await _speaks_a2a_1(ServerCallContext(state={"headers": headers}))
        except A2AError as error:
            return _error(request_id, error)

    params = document.get("params") if isinstance(document, dict) else None
    answer = await DISPATCHER.handle_requests(_starlette_request(request, body, agent, params))
    return HttpResponse(answer.body, status=answer.status_code, content_type="application/json")
