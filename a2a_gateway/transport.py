"""What every A2A binding checks and carries (SPEC §8.2, §8.6): the body limit, the Bearer token,
the version, the params' shape, and the request the SDK's dispatchers read. The checks return the
SDK's errors, not a wire answer, so every binding, HTTP or not, refuses the same question for the
same reason in its own format. `Reply` is the HTTP answer the bindings and the card hand to the two
servers (Django's view, the ASGI app).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.types import InternalError, InvalidParamsError, InvalidRequestError
from a2a.utils.constants import PROTOCOL_VERSION_1_0
from a2a.utils.errors import A2AError, VersionNotSupportedError
from a2a.utils.version_validator import validate_version
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from starlette.requests import Request as StarletteRequest

from a2a_gateway.handler import (
    AGENT_STATE,
    AS_SENT_STATE,
    CYCLE_STATE,
    ORIGIN_STATE,
    AsSent,
    CairnRequestHandler,
)
from a2a_gateway.request_cycle import DjangoCycle
from agents.auth import bearer_token
from agents.models import Agent
from agents.services import agent_for_token
from core.caching import Shown
from core.errors import method_not_allowed
from core.outages import outage_refusal
from core.policy import WWW_AUTHENTICATE, body_limit

ENDPOINT_PATH = "/api/a2a"
JSON_TYPE = "application/json"
# The SDK reads a missing header as 0.3 and names that version; a client needs to hear the header is missing.
MISSING_VERSION = f"the A2A-Version header is missing: send `A2A-Version: {PROTOCOL_VERSION_1_0}`"
# What an HTTP binding sends with a token refusal's 401 (SPEC §8.2).
CHALLENGE_HEADERS = (("WWW-Authenticate", WWW_AUTHENTICATE),)
# protobuf's own JSON forms (Struct, Value, Timestamp, ...) are checked by its parser.
_WELL_KNOWN = "google.protobuf."
# The methods that need an agent (SPEC §8.2), by the names each binding gives them: A2A 1.0's
# (JSON-RPC and gRPC) and 0.3's.
AUTHENTICATED_METHODS = frozenset({"SendMessage", "message/send"})

# The one request handler every binding dispatches to: a question asked on any of them is answered
# by the same code.
REQUEST_HANDLER = CairnRequestHandler()


@dataclass(frozen=True)
class Reply:
    """An HTTP answer in the plainest form both servers can send; `shown`: what a public read's
    answer shows, from which each server has `core.caching` write its caching headers."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = JSON_TYPE
    shown: Shown | None = None


def json_bytes(payload: Any) -> bytes:
    return json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def method_refusal(method: str, allowed: tuple[str, ...]) -> Reply | None:
    """405 with `Allow` for a method a path does not take, else None."""
    if method in allowed:
        return None
    refusal = method_not_allowed(method, allowed)
    return Reply(405, json_bytes(refusal.as_body()), (("Allow", ", ".join(allowed)),))


# The body limit.


class ClientGone(Exception):
    """The client disconnected before its body arrived: there is nobody to answer."""


async def bounded_body(declared_length: str | None, chunks: AsyncIterator[bytes]) -> bytes | None:
    """The body, or None as soon as it is over the limit (the rest is never read): by its
    declared length when it has one, else by what arrives."""
    limit = body_limit()
    if declared_length and declared_length.isdigit() and int(declared_length) > limit:
        return None
    received: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            return None
        received.append(chunk)
    return b"".join(received)


def body_too_large() -> InvalidRequestError:
    """The error for a body over the limit, which is refused before it is parsed (SPEC §8.2)."""
    return InvalidRequestError(
        message=f"Payload too large: the limit is {body_limit() // 1024} KiB"
    )


# The Bearer token.


@dataclass(frozen=True)
class TokenRefusal:
    """Why a request that needs an agent goes without one, for its binding to answer in its own
    format: `unauthenticated` when no valid token came (HTTP: 401 with `CHALLENGE_HEADERS`), else
    the token could not be checked for an outage, answered as the binding answers an internal
    error."""

    error: A2AError
    unauthenticated: bool


async def token_agent(
    headers: Mapping[str, str], operation: str, cycle: DjangoCycle
) -> Agent | TokenRefusal:
    """The agent of the Bearer token that `operation` (named as its binding names it) needs, or
    why there is none. Asked before the version (SPEC §8.2), so a request without a token never
    reaches the domain."""
    token = bearer_token(headers.get("authorization", ""))
    try:
        agent = await cycle.call(agent_for_token, token) if token else None
    except Exception as exc:
        outage = outage_refusal(exc)
        if outage is None:
            raise
        return TokenRefusal(InternalError(message=outage.message), unauthenticated=False)
    if agent is not None:
        return agent
    return TokenRefusal(
        InvalidRequestError(
            message=f"a valid Bearer token is required for {operation} (POST /api/agent/register issues one)"
        ),
        unauthenticated=True,
    )


def unauthenticated_reply(refused: TokenRefusal) -> Reply:
    """HTTP's 401 for a request without a valid token, with the challenge, alike on JSON-RPC and
    HTTP+JSON. The body is the google.rpc.Status A2A 1.0 §11.6 writes for an HTTP error,
    `UNAUTHENTICATED` as in A2A's §3.3.2, and carries no A2A ErrorInfo: authentication is not one
    of A2A's errors (gRPC's UNAUTHENTICATED carries none either). Both official clients then
    report the HTTP 401 itself: an SDK client reads an ErrorInfo's reason before the status (an
    INVALID_REQUEST there made the Python client report a request to fix), and the JavaScript
    client reads a JSON-RPC error object by its code before the status (-32600 made it report a
    malformed request)."""
    status = {"code": 401, "status": "UNAUTHENTICATED", "message": refused.error.message}
    return Reply(401, json_bytes({"error": status}), CHALLENGE_HEADERS)


# The version.


@validate_version(PROTOCOL_VERSION_1_0)
async def _speaks_a2a_1(context: ServerCallContext) -> None:
    """The SDK's own version rule (a missing A2A-Version means 0.3), checked before the params."""


async def version_error(headers: Mapping[str, str]) -> A2AError | None:
    """The SDK's version error for a request that does not speak A2A 1.x, else None; every
    binding of A2A 1.0 asks it."""
    if headers.get("a2a-version") == PROTOCOL_VERSION_1_0:
        return None  # what the SDK's check accepts first: skip building its context
    try:
        await _speaks_a2a_1(ServerCallContext(state={"headers": dict(headers)}))
    except A2AError as refused:
        if not headers.get("a2a-version", "").strip():
            return VersionNotSupportedError(message=MISSING_VERSION)
        return refused
    return None


# The params' shape. protobuf's JSON parser iterates whatever it is given for a message field, so
# a string there (`"configuration": "x"`) reads as an empty message and the request goes ahead as if
# the field were absent. A client that sent it meant something else: SPEC §8.2 makes it invalid
# params, checked before the SDK parses them.


def _field(descriptor: Descriptor, key: str) -> FieldDescriptor | None:
    field = descriptor.fields_by_name.get(key)
    if field is not None:
        return field
    return next((item for item in descriptor.fields if item.json_name == key), None)


def _misplaced(value: Any, descriptor: Descriptor, path: str = "params") -> str | None:
    """The path of the first value that should be a JSON object and is not, else None."""
    if not isinstance(value, dict):
        return path
    for key, item in value.items():
        field = _field(descriptor, key)
        message = field.message_type if field is not None else None
        if (
            field is None
            or message is None
            or field.type != FieldDescriptor.TYPE_MESSAGE
            or message.full_name.startswith(_WELL_KNOWN)
            or message.GetOptions().map_entry
            or item is None
        ):
            continue
        items = item if field.is_repeated else [item]
        if not isinstance(items, list):
            return f"{path}.{key}"
        for index, element in enumerate(items):
            where = f"{path}.{key}[{index}]" if items is item else f"{path}.{key}"
            found = _misplaced(element, message, where)
            if found is not None:
                return found
    return None


def params_error(
    value: Any, descriptor: Descriptor, path: str = "params"
) -> InvalidParamsError | None:
    """The invalid-params error for params (at `path`) holding a value where `descriptor`'s
    message has an object, else None."""
    where = _misplaced(value, descriptor, path)
    return None if where is None else InvalidParamsError(message=f"{where} must be an object")


# The request an SDK dispatcher reads.


class AgentUser(User):
    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return str(self.agent.pk)


@dataclass(frozen=True)
class Facts:
    """What a binding learned of a request before the dispatcher, for the handler: the agent
    of its Bearer token (SendMessage), the site's origin (for a refusal's links), the values
    the SDK's parse into a proto loses (`AsSent`), and the request's `DjangoCycle`, in which the
    handler's work on the ORM's thread runs."""

    agent: Agent | None
    origin: str
    as_sent: AsSent
    cycle: DjangoCycle


class ParsedRequest(StarletteRequest):
    """The request as an SDK dispatcher reads it, its body already read by the binding: the
    JSON-RPC dispatcher reads only `json()`, and gets that document rather than the bytes again;
    the HTTP+JSON one reads `body()`, the bytes its proto parser takes."""

    def __init__(
        self, scope: dict[str, Any], document: Any, facts: Facts, raw: bytes = b""
    ) -> None:
        super().__init__(scope)
        self.document = document
        self.facts = facts
        self.raw = raw

    async def json(self) -> Any:
        return self.document

    async def body(self) -> bytes:
        return self.raw


def with_facts(context: ServerCallContext, facts: Facts) -> ServerCallContext:
    """The SDK's call context with a request's `Facts`, in the state keys the handler reads."""
    if facts.agent is not None:
        context.user = AgentUser(facts.agent)
        context.state[AGENT_STATE] = facts.agent
    context.state[AS_SENT_STATE] = facts.as_sent
    context.state[ORIGIN_STATE] = facts.origin
    context.state[CYCLE_STATE] = facts.cycle
    return context


class CairnContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's context (it keeps the headers its version check reads), plus the request's `Facts`."""

    def build(self, request: StarletteRequest) -> ServerCallContext:
        context = super().build(request)
        if isinstance(request, ParsedRequest):
            with_facts(context, request.facts)
        return context


def dispatcher_request(
    path: str,
    headers: Mapping[str, str],
    document: Any,
    facts: Facts,
    *,
    body: bytes = b"",
    method: str = "POST",
    query_string: bytes = b"",
    path_params: Mapping[str, str] | None = None,
) -> ParsedRequest:
    """The request an SDK dispatcher reads (`ParsedRequest`)."""
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "query_string": query_string,
        "path_params": dict(path_params or {}),
        "headers": [
            (key.encode("latin-1"), value.encode("latin-1")) for key, value in headers.items()
        ],
    }
    return ParsedRequest(scope, document, facts, body)
