"""What `POST /api/a2a` and the card answer, whichever server carries the request: the A2A
transport, once.

The SDK speaks A2A; this module only moves bytes and headers to and from its JSON-RPC dispatcher
(A2A 1.0, and A2A 0.3's methods through the SDK's 0.3 adapter: SPEC §8.6), plus the two checks
the SDK cannot place where SPEC §8.2 wants them: the Bearer token of SendMessage and 0.3's
message/send (HTTP 401, before the version) and the version (before the params). It also holds
what both servers would otherwise each decide: the methods each path allows, the card, and the
body limit. The Django view (WSGI) and the ASGI app (uvicorn) translate their requests into
`http_reply` and its `Reply` back, and nothing more.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from a2a.auth.user import User
from a2a.compat.v0_3 import types as types_v03
from a2a.compat.v0_3.jsonrpc_adapter import JSONRPC03Adapter
from a2a.server.context import ServerCallContext
from a2a.server.jsonrpc_models import JSONParseError
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import InternalError, InvalidParamsError, InvalidRequestError
from a2a.utils.constants import PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_1_0
from a2a.utils.errors import A2AError, VersionNotSupportedError
from a2a.utils.version_validator import validate_version
from asgiref.sync import sync_to_async
from django.core import signals
from jsonrpc.exceptions import JSONRPCException
from jsonrpc.jsonrpc2 import JSONRPC20Request
from starlette.requests import Request as StarletteRequest

from a2a_gateway.card import agent_card_json, card_variant
from a2a_gateway.etag import card_etag, if_none_match_hits
from a2a_gateway.fast_reads import FAST_METHODS, fast_read
from a2a_gateway.handler import (
    AGENT_STATE,
    AS_SENT_STATE,
    ORIGIN_STATE,
    AsSent,
    CairnRequestHandler,
)
from a2a_gateway.params_shape import misplaced_value
from a2a_gateway.reads import DJANGO_SOURCE, DjangoSource, Source
from agents.auth import bearer_token
from agents.models import Agent
from agents.services import agent_for_token
from core.errors import method_not_allowed
from core.json_input import InvalidJson, parse_json
from core.outages import outage_refusal
from core.policy import WWW_AUTHENTICATE, body_limit

ENDPOINT_PATH = "/api/a2a"
# Some clients (the A2A 1.0 TCK among them) append a slash to the card's URL: the same endpoint.
ENDPOINT_PATHS = (ENDPOINT_PATH, ENDPOINT_PATH + "/")
CARD_PATH = "/.well-known/agent-card.json"
ENDPOINT_METHODS = ("GET", "HEAD", "POST")  # GET: the endpoint documents itself with the card
CARD_METHODS = ("GET", "HEAD")
AUTHENTICATED_METHODS = frozenset({"SendMessage", "message/send"})
# A2A 0.3's method names, served by the SDK's 0.3 adapter on the same endpoint (SPEC §8.6).
V0_3_METHODS = frozenset(JSONRPC03Adapter.METHOD_TO_MODEL)
V0_3_STREAMING_METHODS = frozenset({"message/stream", "tasks/resubscribe"})
JSON_TYPE = "application/json"
# A2A 1.0 §8.6.1: a card may be cached; five minutes keeps a deploy's new card close behind.
CARD_CACHE_CONTROL = "public, max-age=300"
# The SDK reads a missing header as 0.3 and names that version; a client needs to hear the header is missing.
MISSING_VERSION = f"the A2A-Version header is missing: send `A2A-Version: {PROTOCOL_VERSION_1_0}`"


@dataclass(frozen=True)
class Reply:
    """An HTTP answer in the plainest form both servers can send."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = JSON_TYPE


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
    """What the endpoint learned of a request before the dispatcher, for the handler: the agent
    of its Bearer token (SendMessage), the site's origin (for a refusal's links), and the values
    the SDK's parse into a proto loses (`AsSent`)."""

    agent: Agent | None
    origin: str
    as_sent: AsSent


class ParsedRequest(StarletteRequest):
    """The request as an SDK dispatcher reads it, its body already read by the endpoint: the
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


class CairnContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's context (it keeps the headers its version check reads), plus the request's `Facts`."""

    def build(self, request: StarletteRequest) -> ServerCallContext:
        context = super().build(request)
        if isinstance(request, ParsedRequest):
            facts = request.facts
            if facts.agent is not None:
                context.user = AgentUser(facts.agent)
                context.state[AGENT_STATE] = facts.agent
            context.state[AS_SENT_STATE] = facts.as_sent
            context.state[ORIGIN_STATE] = facts.origin
        return context


DISPATCHER = JsonRpcDispatcher(
    CairnRequestHandler(), context_builder=CairnContextBuilder(), enable_v0_3_compat=True
)


def json_bytes(payload: Any) -> bytes:
    return json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def _error(request_id: Any, error: A2AError | JSONParseError, status: int = 200) -> Reply:
    return Reply(status, json_bytes(build_error_response(request_id, error)))


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
    if not isinstance(parsed, JSONRPC20Request) or (
        parsed.method not in JsonRpcDispatcher.METHOD_TO_MODEL and parsed.method not in V0_3_METHODS
    ):
        return None
    return request_id, parsed.method


@validate_version(PROTOCOL_VERSION_1_0)
async def _speaks_a2a_1(context: ServerCallContext) -> None:
    """The SDK's own version rule (a missing A2A-Version means 0.3), checked before the params."""


@validate_version(PROTOCOL_VERSION_0_3)
async def _speaks_a2a_0_3(context: ServerCallContext) -> None:
    """The SDK's version rule for its 0.3 adapter: A2A-Version absent or 0.x."""


async def _v0_3_refusal(request_id: Any, method: str, headers: Mapping[str, str]) -> Reply | None:
    """What a 0.3 method gets before the SDK's 0.3 adapter, or None to go on. A version other
    than 0.3 is -32009, which the adapter would turn into -32603 since 0.3 has no such code.
    Cairn does not stream: the 0.3 streaming methods get 0.3's -32004 as one JSON answer, as
    the 1.0 ones do, rather than an event stream holding only that error."""
    try:
        await _speaks_a2a_0_3(ServerCallContext(state={"headers": dict(headers)}))
    except A2AError as refused:
        return _error(request_id, refused)
    if method in V0_3_STREAMING_METHODS:
        answer = types_v03.JSONRPCErrorResponse(
            id=request_id,
            error=types_v03.UnsupportedOperationError(
                message="Cairn does not stream: use message/send, which answers at once"
            ),
        )
        return Reply(
            200, json_bytes(answer.model_dump(mode="json", by_alias=True, exclude_none=True))
        )
    return None


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
    """The request an SDK dispatcher reads: the JSON-RPC one reads `document`, the HTTP+JSON one
    `body`, and the context builder adds `facts`."""
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


class DjangoCycle:
    """Django's request signals around work on the ORM's thread, for a caller outside Django's
    request cycle (the ASGI app): the connection is checked before and given back after, as
    under Django. Entered before the first such work only, so a read answered from the stored
    forms on the event loop never enters it."""

    def __init__(self, *, inside_already: bool) -> None:
        self.inside_already = inside_already
        self.started = False

    async def enter(self) -> None:
        if not self.inside_already and not self.started:
            self.started = True
            await sync_to_async(signals.request_started.send)(sender=DjangoSource)

    async def leave(self) -> None:
        if self.started:
            self.started = False
            await sync_to_async(signals.request_finished.send)(sender=DjangoSource)


def _parsed(body: bytes | None) -> Any:
    """The body's JSON, or the `Reply` that refuses it: over the limit, or not JSON."""
    if body is None:
        return _error(
            None,
            InvalidRequestError(
                message=f"Payload too large: the limit is {body_limit() // 1024} KiB"
            ),
        )
    try:
        return parse_json(body)
    except InvalidJson as error:
        return _error(None, JSONParseError(message=str(error)))


async def _agent(
    request_id: Any, method: str, headers: Mapping[str, str], cycle: DjangoCycle
) -> Agent | Reply:
    """The agent of the Bearer token a method needs, or the answer without one (SPEC §8.2: 401
    before the version, so a request without a token never reaches the domain)."""
    await cycle.enter()
    token = bearer_token(headers.get("authorization", ""))
    try:
        agent = await sync_to_async(agent_for_token)(token) if token else None
    except Exception as exc:
        outage = outage_refusal(exc)
        if outage is None:
            raise
        return _error(request_id, InternalError(message=outage.message))
    if agent is not None:
        return agent
    refused = _error(
        request_id,
        InvalidRequestError(
            message=f"a valid Bearer token is required for {method} (POST /api/agent/register issues one)"
        ),
        status=401,
    )
    return Reply(refused.status, refused.body, (("WWW-Authenticate", WWW_AUTHENTICATE),))


def _params_refusal(request_id: Any, method: str, document: dict[str, Any]) -> Reply | None:
    """-32602 for params holding a value where the method's proto has an object."""
    if "params" not in document:
        return None
    model: Any = JsonRpcDispatcher.METHOD_TO_MODEL[method]  # a protobuf message class
    where = misplaced_value(document["params"], model.DESCRIPTOR)
    if where is None:
        return None
    return _error(request_id, InvalidParamsError(message=f"{where} must be an object"))


async def _checked(
    document: Any,
    headers: Mapping[str, str],
    cycle: DjangoCycle,
    fast_reads: bool,
    reads: Source,
) -> Reply | Agent | None:
    """SPEC §8.2's checks in their order for a well-formed single request (the token, the
    version, the params' shape; a 0.3 method: its version and streaming rules), then a read
    answered from the stored forms (GetTask, ListTasks, 0.3's tasks/get). A `Reply` ends the
    request there; else the agent (or None) goes with it to the dispatcher, which answers
    everything else as the SDK does."""
    envelope = _single_request(document)
    if envelope is None:
        return None
    request_id, method = envelope
    agent = None
    if method in AUTHENTICATED_METHODS:
        found = await _agent(request_id, method, headers, cycle)
        if isinstance(found, Reply):
            return found
        agent = found
    if method in V0_3_METHODS:
        refused = await _v0_3_refusal(request_id, method, headers)
    else:
        refused = await _version_refusal(request_id, headers) or _params_refusal(
            request_id, method, document
        )
    if refused is not None:
        return refused
    if fast_reads and method in FAST_METHODS:
        answer = await fast_read(method, document, request_id, reads)
        if answer is not None:
            return Reply(200, answer)
    return agent


async def a2a_reply(
    *,
    path: str,
    headers: Mapping[str, str],
    body: bytes | None,
    origin: str,
    fast_reads: bool = True,
    reads: Source = DJANGO_SOURCE,
    outside_django: bool = False,
) -> Reply:
    """The answer to one `POST /api/a2a`. `headers` are lower-cased; `body` is None when it was
    over the limit (read no further, parse nothing); `origin` is the site's, for the links a
    refusal gives. `fast_reads=False` sends GetTask, ListTasks and 0.3's tasks/get to the SDK's
    dispatcher too: the reference the fast path is tested against. `reads` is where the fast
    path finds the stored forms; `outside_django`: the caller is not inside Django's request
    cycle, so the work on the ORM's thread is wrapped in its signals here."""
    document = _parsed(body)
    if isinstance(document, Reply):
        return document
    cycle = DjangoCycle(inside_already=not outside_django)
    try:
        checked = await _checked(document, headers, cycle, fast_reads, reads)
        if isinstance(checked, Reply):
            return checked
        await cycle.enter()
        params = document.get("params") if isinstance(document, dict) else None
        facts = Facts(agent=checked, origin=origin, as_sent=AsSent.of(params))
        answer = await DISPATCHER.handle_requests(
            dispatcher_request(path, headers, document, facts)
        )
        return Reply(answer.status_code, bytes(answer.body))
    finally:
        await cycle.leave()


async def _version_refusal(request_id: Any, headers: Mapping[str, str]) -> Reply | None:
    """The SDK's version error, or None when the request speaks A2A 1.x."""
    refused = await version_error(headers)
    return None if refused is None else _error(request_id, refused)


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


@lru_cache(maxsize=32)
def _card_entity(site: str, variant: str) -> tuple[bytes, str]:
    """The card's bytes and ETag, once per site, witnesses and process: the card depends only
    on the code and those."""
    card = agent_card_json(site)
    return json_bytes(card), card_etag(card)


def card_reply(site: str, if_none_match: str | None) -> Reply:
    """The card as the SDK's card route serves it: a weak ETag, and 304 when the client has it;
    cacheable for five minutes."""
    body, etag = _card_entity(site, card_variant())
    headers = (("ETag", etag), ("Cache-Control", CARD_CACHE_CONTROL))
    if if_none_match and if_none_match_hits(if_none_match, etag):
        return Reply(304, b"", headers)
    return Reply(200, body, headers)


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


def method_refusal(method: str, path: str) -> Reply | None:
    """405 with `Allow` for a method the path does not take, else None."""
    allowed = ENDPOINT_METHODS if path in ENDPOINT_PATHS else CARD_METHODS
    if method in allowed:
        return None
    refusal = method_not_allowed(method, allowed)
    return Reply(405, json_bytes(refusal.as_body()), (("Allow", ", ".join(allowed)),))


async def http_reply(
    *,
    method: str,
    path: str,
    headers: Mapping[str, str],
    origin: str,
    body: AsyncIterator[bytes],
    reads: Source = DJANGO_SOURCE,
    outside_django: bool = False,
) -> Reply:
    """The answer to any request for the endpoint or the card. `headers` are lower-cased;
    `body` yields the request body's chunks as they arrive."""
    refused = method_refusal(method, path)
    if refused is not None:
        return refused
    if method in CARD_METHODS:
        return card_reply(origin, headers.get("if-none-match"))
    return await a2a_reply(
        path=path,
        headers=headers,
        body=await bounded_body(headers.get("content-length"), body),
        origin=origin,
        reads=reads,
        outside_django=outside_django,
    )
