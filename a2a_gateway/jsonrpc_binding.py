"""The A2A JSON-RPC binding on `POST /api/a2a` (A2A 1.0, and 0.3's methods through the SDK's 0.3
adapter: SPEC §8.6): SPEC §8.2's checks and this binding's own rules, before the SDK's dispatcher.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson
from a2a.compat.v0_3 import conversions
from a2a.compat.v0_3 import types as types_v03
from a2a.compat.v0_3.jsonrpc_adapter import JSONRPC03Adapter, _to_v03_jsonrpc_error
from a2a.server.context import ServerCallContext
from a2a.server.jsonrpc_models import JSONParseError
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.utils.constants import PROTOCOL_VERSION_0_3
from a2a.utils.errors import A2AError
from a2a.utils.version_validator import validate_version
from google.protobuf.json_format import ParseDict, ParseError
from jsonrpc.exceptions import JSONRPCException
from jsonrpc.jsonrpc2 import JSONRPC20Request
from pydantic import ValidationError

from a2a_gateway import transport
from a2a_gateway.card import CARD_METHODS, card_reply
from a2a_gateway.handler import AsSent, Facts
from a2a_gateway.request_cycle import DjangoCycle
from a2a_gateway.stored_reads import DJANGO_SOURCE, DjangoSource, stored_read, stored_task
from a2a_gateway.transport import Reply, json_bytes
from agents.models import Agent
from core.json_input import InvalidJson, parse_json

# Some clients (the A2A 1.0 TCK among them) append a slash to the card's URL.
ENDPOINT_PATHS = (transport.ENDPOINT_PATH, transport.ENDPOINT_PATH + "/")
ENDPOINT_METHODS = ("GET", "HEAD", "POST")  # GET: the endpoint documents itself with the card
# A2A 0.3's method names, served by the SDK's 0.3 adapter on the same endpoint (SPEC §8.6).
V0_3_METHODS = frozenset(JSONRPC03Adapter.METHOD_TO_MODEL)
V0_3_STREAMING_METHODS = frozenset({"message/stream", "tasks/resubscribe"})
V0_3_GET_TASK = "tasks/get"
FAST_METHODS = frozenset({"GetTask", "ListTasks", V0_3_GET_TASK})

DISPATCHER = JsonRpcDispatcher(
    transport.REQUEST_HANDLER,
    context_builder=transport.CairnContextBuilder(),
    enable_v0_3_compat=True,
)


def _error(request_id: Any, error: A2AError | JSONParseError) -> Reply:
    return Reply(200, json_bytes(build_error_response(request_id, error)))


def _single_request(document: Any) -> tuple[Any, str] | None:
    """(id, method) of a well-formed single request for a method the SDK routes, else None: the
    dispatcher answers the rest as the SDK does."""
    if not isinstance(document, dict) or document.get("jsonrpc") != "2.0":
        return None
    request_id = document.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int | None):
        return None
    try:
        parsed = JSONRPC20Request.from_data(document)
    except (JSONRPCException, ValueError, TypeError):
        return None
    if parsed.method not in JsonRpcDispatcher.METHOD_TO_MODEL and parsed.method not in V0_3_METHODS:
        return None
    return request_id, parsed.method


def _in_envelope(request_id: Any, result: Any) -> bytes | None:
    """JSON-RPC's response around the result (stored JSON as `orjson.Fragment`s); None for an id
    orjson cannot write (an int beyond 64 bits), which the dispatcher then answers."""
    try:
        return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})
    except TypeError:
        return None


async def fast_read(
    method: str, document: dict[str, Any], request_id: Any, source: DjangoSource = DJANGO_SOURCE
) -> bytes | None:
    """The reply body to a checked GetTask, ListTasks or 0.3 tasks/get from the stored forms, its
    params parsed and refused as the SDK's dispatcher or its 0.3 adapter does (whose conversion to
    1.0's GetTaskRequest reads a `historyLength` of 0 as none); None leaves it to the dispatcher."""
    v0_3 = method == V0_3_GET_TASK
    try:
        if not v0_3:
            params = document.get("params", {})
            model = JsonRpcDispatcher.METHOD_TO_MODEL[method]()
            request = ParseDict(params, model, ignore_unknown_fields=True)
            sent_status = params.get("status") if isinstance(params, dict) else None
            read = stored_read(request, sent_status, source)
        else:
            parsed = types_v03.GetTaskRequest.model_validate(document)  # the adapter's model
            read = stored_task(conversions.to_core_get_task_request(parsed), source, "0.3")
    except (ParseError, ValidationError):  # the SDK refuses it in its own words
        return None
    try:
        found = await transport.read_here(read)
    except A2AError as refused:
        if not v0_3:
            return json_bytes(build_error_response(request_id, refused))
        error = _to_v03_jsonrpc_error(refused).model_dump(by_alias=True)
        return json_bytes({"jsonrpc": "2.0", "id": request_id, "error": error})
    return None if found is None else _in_envelope(request_id, transport.stored_result(found))


@validate_version(PROTOCOL_VERSION_0_3)
async def _speaks_a2a_0_3(context: ServerCallContext) -> None:
    """The SDK's version rule for its 0.3 adapter."""


async def _checked(
    document: Any,
    headers: Mapping[str, str],
    cycle: DjangoCycle,
    fast_reads: bool,
    reads: DjangoSource,
) -> Reply | Agent | None:
    """SPEC §8.2's checks for a well-formed single request, then a stored read: a `Reply` ends the
    request; else its agent (or None) goes to the dispatcher. 0.3 is checked before the SDK's
    adapter, which would make another version's -32009 a -32603 and answer streaming methods with
    an event stream, not 0.3's -32004 as one JSON answer."""
    envelope = _single_request(document)
    if envelope is None:
        return None
    request_id, method = envelope
    try:
        agent = await transport.token_agent(headers, method, cycle)
        if method in V0_3_METHODS:
            await _speaks_a2a_0_3(ServerCallContext(state={"headers": dict(headers)}))
        else:
            await transport.check_version(headers)
            model: Any = JsonRpcDispatcher.METHOD_TO_MODEL[method]  # a protobuf message class
            if "params" in document:
                transport.check_params(document["params"], model.DESCRIPTOR)
    except transport.Unauthenticated as refused:
        return transport.unauthenticated_reply(refused)
    except A2AError as refused:
        return _error(request_id, refused)
    if method in V0_3_STREAMING_METHODS:
        unsupported = types_v03.JSONRPCErrorResponse(
            id=request_id,
            error=types_v03.UnsupportedOperationError(
                message="Cairn does not stream: use message/send, which answers at once"
            ),
        )
        return Reply(
            200, json_bytes(unsupported.model_dump(mode="json", by_alias=True, exclude_none=True))
        )
    if fast_reads and method in FAST_METHODS:
        if (answer := await fast_read(method, document, request_id, reads)) is not None:
            return Reply(200, answer)
    return agent


async def a2a_reply(
    *,
    path: str,
    headers: Mapping[str, str],
    body: bytes | None,
    origin: str,
    fast_reads: bool = True,
    reads: DjangoSource = DJANGO_SOURCE,
    outside_django: bool = False,
) -> Reply:
    """The answer to one `POST /api/a2a`; `body` is None when over the limit. `fast_reads=False`
    leaves reads to the SDK's dispatcher (the reference the stored reads are tested against);
    `outside_django`: the caller is outside Django's request cycle, so its signals are sent here."""
    if body is None:
        return _error(None, transport.body_too_large())
    try:
        document = parse_json(body)
    except InvalidJson as error:
        return _error(None, JSONParseError(message=str(error)))
    cycle = DjangoCycle(inside_already=not outside_django)
    try:
        checked = await _checked(document, headers, cycle, fast_reads, reads)
        if isinstance(checked, Reply):
            return checked
        await cycle.enter()
        params = document.get("params") if isinstance(document, dict) else None
        facts = Facts(agent=checked, origin=origin, as_sent=AsSent.of(params), cycle=cycle)
        request = transport.ParsedRequest(path, headers, document, facts)
        answer = await DISPATCHER.handle_requests(request)
        return Reply(answer.status_code, bytes(answer.body))
    finally:
        await cycle.leave()


async def http_reply(
    *,
    method: str,
    path: str,
    headers: Mapping[str, str],
    origin: str,
    body: AsyncIterator[bytes],
    reads: DjangoSource = DJANGO_SOURCE,
    outside_django: bool = False,
) -> Reply:
    """The answer to any request for the endpoint or the card; `headers` are lower-cased."""
    if path not in ENDPOINT_PATHS or method in CARD_METHODS:  # GET /api/a2a: the card too
        return card_reply(method=method, site=origin)
    if (refused := transport.method_refusal(method, ENDPOINT_METHODS)) is not None:
        return refused
    return await a2a_reply(
        path=path,
        headers=headers,
        body=await transport.bounded_body(headers.get("content-length"), body),
        origin=origin,
        reads=reads,
        outside_django=outside_django,
    )
