"""The A2A 1.0 HTTP+JSON binding (SPEC §8.6, A2A 1.0 §11) under `<site>/api/a2a`: the SDK's REST
routes and dispatcher, with the routes matched here (a path or method the binding lacks gets this
binding's error) and bodies read by Cairn's JSON reader (no client's bytes reach the SDK's parser
as a 5xx).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, cast

import orjson
from a2a.server.routes.rest_routes import create_rest_routes
from a2a.types import GetTaskRequest, ListTasksRequest, SendMessageRequest, TaskState
from a2a.utils.constants import A2A_JSON_MEDIA_TYPE, VERSION_HEADER
from a2a.utils.error_handlers import build_rest_error_payload
from a2a.utils.errors import A2AError, InvalidParamsError
from a2a.utils.errors import MethodNotFoundError as A2AMethodNotFoundError
from a2a.utils.proto_utils import parse_params
from google.protobuf.descriptor import Descriptor
from google.protobuf.json_format import ParseDict, ParseError
from google.protobuf.message import Message
from starlette.datastructures import QueryParams
from starlette.routing import Match, Route

from a2a_gateway import transport
from a2a_gateway.handler import AsSent, Facts
from a2a_gateway.request_cycle import DjangoCycle
from a2a_gateway.stored_reads import DJANGO_SOURCE, DjangoSource, StoredTask, stored_read
from a2a_gateway.transport import ENDPOINT_PATH, Reply
from core.caching import Shown
from core.json_input import InvalidJson, parse_json

REST_PREFIX = ENDPOINT_PATH + "/"
LIST_PATH = f"{ENDPOINT_PATH}/tasks"
# The routes whose reads the stored forms answer, and their requests.
FAST_MODELS: dict[str, type[GetTaskRequest | ListTasksRequest]] = {
    f"{ENDPOINT_PATH}/tasks/{{id}}": GetTaskRequest,
    LIST_PATH: ListTasksRequest,
}
# The bodies that hold a SendMessageRequest: where a JSON object is due, a client must send one.
BODY_PATHS = (f"{ENDPOINT_PATH}/message:send", f"{ENDPOINT_PATH}/message:stream")
SEND_MESSAGE_FIELDS = cast(Descriptor, SendMessageRequest.DESCRIPTOR)
# A2A 1.0's mapping table, where the SDK's differs (it sends TaskNotCancelableError with 400).
STATUS_BY_REASON = {"TASK_NOT_CANCELABLE": 409}

ROUTES: tuple[Route, ...] = tuple(
    route
    for route in create_rest_routes(
        transport.REQUEST_HANDLER, transport.CairnContextBuilder(), path_prefix=ENDPOINT_PATH
    )
    if isinstance(route, Route)  # the `/{tenant}` mount is not served
)


def is_rest_path(path: str) -> bool:
    return path.startswith(REST_PREFIX) and path != REST_PREFIX


def _error(error: Exception, *, status: int | None = None, headers: Any = ()) -> Reply:
    """The SDK's HTTP+JSON error object; `status` where A2A or HTTP says another than the SDK."""
    payload = build_rest_error_payload(error)
    if status is not None:
        payload["error"]["code"] = status
    return Reply(payload["error"]["code"], transport.json_bytes(payload), tuple(headers))


def _match(method: str, path: str) -> tuple[Route | None, dict[str, Any], set[str]]:
    """The SDK route for this request and its path parameters, else the methods the path takes."""
    scope = {"type": "http", "method": method, "path": path, "root_path": ""}
    allowed: set[str] = set()
    for route in ROUTES:
        match, child = route.matches(scope)
        if match is Match.FULL:
            return route, child["path_params"], allowed
        if match is Match.PARTIAL:
            allowed |= route.methods or set()
    return None, {}, allowed


def _unrouted(method: str, path: str, allowed: set[str]) -> Reply:
    if not allowed:
        return _error(
            A2AMethodNotFoundError(
                message=f"no A2A HTTP+JSON operation at {path} (A2A 1.0 §11; this server has no tenants)"
            )
        )
    methods = ", ".join(sorted(allowed))
    return _error(
        A2AMethodNotFoundError(message=f"{path} takes {methods}, not {method}"),
        status=405,
        headers=(("Allow", methods),),
    )


def state_name(value: str) -> str:
    """A2A 1.0 §11's `working` as `TASK_STATE_WORKING`; anything else is for the handler."""
    name = "TASK_STATE_" + value.upper().replace("-", "_")
    return name if value.islower() and name in TaskState.keys() else value


def _readable(parse: Callable[[], object]) -> None:
    """Params `parse` cannot read get JSON-RPC's invalid-params error (SPEC §8.6)."""
    try:
        parse()
    except (ParseError, ValueError) as error:  # protobuf's parser, and `_check_booleans`
        raise InvalidParamsError(data={"parseError": str(error)}) from None


def _check_booleans(query: QueryParams, model: type[Message]) -> None:
    """A boolean neither `true` nor `false` (A2A 1.0 §11.5), which the SDK reads as false."""
    for field in model.DESCRIPTOR.fields:
        sent = query.getlist(field.camelcase_name)
        if field.type == field.TYPE_BOOL and sent and sent[-1].lower() not in ("true", "false"):
            raise ValueError(f"{field.camelcase_name} must be true or false")


async def fast_rest_read(
    request: GetTaskRequest | ListTasksRequest,
    query: QueryParams,
    task_id: str | None,
    sent_status: Any,
    source: DjangoSource = DJANGO_SOURCE,
) -> Reply | None:
    """A version-checked `GET /tasks/{id}` or `GET /tasks` from the stored forms (varying by
    `A2A-Version`: another gets an error); None leaves it to the dispatcher."""
    try:
        parse_params(query, request)
    except ParseError:  # the SDK refuses it in its own words
        return None
    if isinstance(request, GetTaskRequest) and task_id is not None:
        request.id = task_id  # the path's id wins over a query's, as in the SDK's dispatcher
    read = await transport.read_here(stored_read(request, sent_status, source))
    if read is None:
        return None
    if isinstance(read, StoredTask):
        shown = Shown.task(read.open_until, vary=(VERSION_HEADER,))
    else:
        shown = Shown.listing(read.open_until, vary=(VERSION_HEADER,))
    body = orjson.dumps(transport.stored_result(read))
    return Reply(200, body, content_type=A2A_JSON_MEDIA_TYPE, shown=shown)


def _as_a2a(status: int, body: bytes, content_type: str) -> Reply:
    """The dispatcher's answer, with A2A's status where the SDK's table differs."""
    if status >= 400:
        payload = json.loads(body)
        details = payload["error"].get("details") or [{}]
        if (override := STATUS_BY_REASON.get(details[0].get("reason", ""))) is not None:
            payload["error"]["code"] = status = override
            body = transport.json_bytes(payload)
    return Reply(status, body, content_type=content_type)


async def rest_reply(
    *,
    method: str,
    path: str,
    query_string: bytes,
    headers: Mapping[str, str],
    body: AsyncIterator[bytes],
    origin: str,
    fast_reads: bool = True,
    reads: DjangoSource = DJANGO_SOURCE,
    outside_django: bool = False,
) -> Reply:
    """The answer to one request of the binding; the arguments are `jsonrpc_binding`'s."""
    route, path_params, allowed = _match(method, path)
    if route is None:
        return _unrouted(method, path, allowed)
    raw = await transport.bounded_body(headers.get("content-length"), body)
    if raw is None:
        return _error(transport.body_too_large(), status=413)
    cycle = DjangoCycle(inside_already=not outside_django)
    try:
        document: Any = None
        as_sent = AsSent()
        query = QueryParams(query_string)  # parsed once, for every step that reads it
        model = FAST_MODELS.get(route.path)
        try:
            agent = await transport.token_agent(headers, path.removeprefix(REST_PREFIX), cycle)
            await transport.check_version(headers)
            if path in BODY_PATHS:
                document = parse_json(raw)
                transport.check_params(document, SEND_MESSAGE_FIELDS, "body")
                as_sent = AsSent.of(document)
            if path == LIST_PATH and "status" in query:
                # `status` in the proto's words, and as sent: the handler tells an unknown one by it.
                as_sent = AsSent(status=state_name(query.getlist("status")[-1]))
                query = QueryParams(
                    [(k, state_name(v) if k == "status" else v) for k, v in query.multi_items()]
                )
            if model is not None:
                _readable(lambda: _check_booleans(query, model))
                if fast_reads:  # a refused read is written as the dispatcher writes the handler's
                    served = await fast_rest_read(
                        model(), query, path_params.get("id"), as_sent.status, reads
                    )
                    if served is not None:
                        return served
                # Only a query the stored read declined: it parses the same query itself.
                _readable(lambda: parse_params(query, model()))
        except transport.Unauthenticated as refused:
            return transport.unauthenticated_reply(refused)
        except InvalidJson as error:
            return _error(ParseError(str(error)))
        except A2AError as refused:
            return _error(refused)
        request = transport.ParsedRequest(
            path,
            headers,
            document,
            Facts(agent=agent, origin=origin, as_sent=as_sent, cycle=cycle),
            body=raw,
            method=method,
            query_string=str(query).encode(),
            path_params=path_params,
        )
        await cycle.enter()
        answer = await route.endpoint(request)
        if answer.status_code == 400 and path in BODY_PATHS:
            # Asked only after the dispatcher's 400, so a body is parsed into its proto once.
            try:
                _readable(
                    lambda: ParseDict(document, SendMessageRequest(), ignore_unknown_fields=True)
                )
            except InvalidParamsError as unreadable:
                return _error(unreadable)
        return _as_a2a(
            answer.status_code, bytes(answer.body), answer.media_type or transport.JSON_TYPE
        )
    finally:
        await cycle.leave()
