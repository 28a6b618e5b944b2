"""What every A2A binding checks and carries (SPEC §8.2, §8.6). The checks raise the SDK's errors,
not a wire answer, so every binding refuses the same question alike in its own format.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
from a2a.server.context import ServerCallContext
from a2a.server.routes.common import DefaultServerCallContextBuilder, serialize_list_tasks_response
from a2a.types import InternalError, InvalidParamsError, InvalidRequestError
from a2a.utils.constants import PROTOCOL_VERSION_1_0
from a2a.utils.errors import A2AError, VersionNotSupportedError
from a2a.utils.version_validator import validate_version
from django.db import DatabaseError
from google.protobuf.descriptor import Descriptor
from starlette.requests import Request as StarletteRequest

from a2a_gateway.handler import FACTS_STATE, CairnRequestHandler, Facts, failure_error
from a2a_gateway.read_connections import Unavailable
from a2a_gateway.request_cycle import DjangoCycle
from a2a_gateway.stored_reads import StoredPage, StoredTask
from a2a_gateway.translate import JSON_TYPE, sdk_json
from agents.auth import bearer_token
from agents.models import Agent
from agents.services import agent_for_token
from core.caching import Shown
from core.errors import method_not_allowed
from core.outages import OUTAGES, unavailable
from core.policy import WWW_AUTHENTICATE, body_limit

ENDPOINT_PATH = "/api/a2a"
# The SDK reads a missing header as 0.3 and names that version; a client needs to hear the header is missing.
MISSING_VERSION = f"the A2A-Version header is missing: send `A2A-Version: {PROTOCOL_VERSION_1_0}`"
# protobuf's own JSON forms (Struct, Value, Timestamp, ...) are checked by its parser.
_WELL_KNOWN = "google.protobuf."
# The methods that need an agent (SPEC §8.2), by the names each binding gives them: A2A 1.0's
# (JSON-RPC and gRPC), HTTP+JSON's (its path under the endpoint) and 0.3's.
AUTHENTICATED_METHODS = frozenset({"SendMessage", "message:send", "message/send"})

# The one request handler: a question asked on any binding is answered by the same code.
REQUEST_HANDLER = CairnRequestHandler()

T = TypeVar("T")


@dataclass(frozen=True)
class Reply:
    """An HTTP answer both servers send; `shown`: what a public read shows (`core.caching`)."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = JSON_TYPE
    shown: Shown | None = None


def json_bytes(payload: Any) -> bytes:
    return sdk_json(payload).encode()


def method_refusal(method: str, allowed: tuple[str, ...]) -> Reply | None:
    if method in allowed:
        return None
    refusal = method_not_allowed(method, allowed)
    return Reply(405, json_bytes(refusal.as_body()), (("Allow", ", ".join(allowed)),))


class ClientGone(Exception):
    """The client disconnected before its body arrived: there is nobody to answer."""


async def bounded_body(declared_length: str | None, chunks: AsyncIterator[bytes]) -> bytes | None:
    """The body, or None as soon as it is over the limit (the rest is never read)."""
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
    """A body over the limit is refused before it is parsed (SPEC §8.2)."""
    return InvalidRequestError(
        message=f"Payload too large: the limit is {body_limit() // 1024} KiB"
    )


class Unauthenticated(Exception):
    """No valid Bearer token where one is needed: no A2A error (HTTP 401, gRPC UNAUTHENTICATED)."""


async def token_agent(
    headers: Mapping[str, str], operation: str, cycle: DjangoCycle
) -> Agent | None:
    """The token's agent when `operation` (as its binding names it) needs one, else None; raises
    `Unauthenticated`, or the SDK's internal error when an outage kept the token unchecked."""
    if operation not in AUTHENTICATED_METHODS:
        return None
    token = bearer_token(headers.get("authorization", ""))
    try:
        agent = await cycle.call(agent_for_token, token) if token else None
    except OUTAGES as outage:
        raise InternalError(message=unavailable(outage).message) from None
    if agent is None:
        raise Unauthenticated(
            f"a valid Bearer token is required for {operation} (POST /api/agent/register issues one)"
        )
    return agent


def unauthenticated_reply(refused: Unauthenticated) -> Reply:
    """HTTP's 401 with the challenge (SPEC §8.2) on both HTTP bindings: A2A 1.0 §11.6's
    google.rpc.Status, `UNAUTHENTICATED`, with no ErrorInfo, which both official clients would
    read first and report as a bad request rather than the 401."""
    status = {"code": 401, "status": "UNAUTHENTICATED", "message": str(refused)}
    return Reply(401, json_bytes({"error": status}), (("WWW-Authenticate", WWW_AUTHENTICATE),))


@validate_version(PROTOCOL_VERSION_1_0)
async def _speaks_a2a_1(context: ServerCallContext) -> None:
    """The SDK's own version rule (a missing A2A-Version means 0.3), checked before the params."""


async def check_version(headers: Mapping[str, str]) -> None:
    if headers.get("a2a-version") == PROTOCOL_VERSION_1_0:
        return  # what the SDK's check accepts first: skip building its context
    try:
        await _speaks_a2a_1(ServerCallContext(state={"headers": dict(headers)}))
    except A2AError:
        if not headers.get("a2a-version", "").strip():
            raise VersionNotSupportedError(message=MISSING_VERSION) from None
        raise


def _misplaced(value: Any, descriptor: Descriptor, path: str = "params") -> str | None:
    """The path of the first value that should be a JSON object and is not, else None."""
    if not isinstance(value, dict):
        return path
    for key, item in value.items():
        field = descriptor.fields_by_name.get(key) or next(
            (named for named in descriptor.fields if named.json_name == key), None
        )
        message = field.message_type if field is not None else None
        if (
            field is None
            or message is None
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
            if (found := _misplaced(element, message, where)) is not None:
                return found
    return None


def check_params(value: Any, descriptor: Descriptor, path: str = "params") -> None:
    """Refuses a value where `descriptor` has an object (SPEC §8.2), which the SDK's parser would
    read as absent (`"configuration": "x"`)."""
    if (where := _misplaced(value, descriptor, path)) is not None:
        raise InvalidParamsError(message=f"{where} must be an object")


class ParsedRequest(StarletteRequest):
    """The request as an SDK dispatcher reads it, its body already read by the binding."""

    def __init__(
        self,
        path: str,
        headers: Mapping[str, str],
        document: Any,
        facts: Facts,
        *,
        body: bytes = b"",
        method: str = "POST",
        query_string: bytes = b"",
        path_params: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            {
                "type": "http",
                "method": method,
                "path": path,
                "query_string": query_string,
                "path_params": dict(path_params or {}),
                "headers": [
                    (key.encode("latin-1"), value.encode("latin-1"))
                    for key, value in headers.items()
                ],
            }
        )
        self.document = document
        self.facts = facts
        self.raw = body

    async def json(self) -> Any:
        return self.document

    async def body(self) -> bytes:
        return self.raw


class CairnContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's context (it keeps the headers its version check reads), plus the request's `Facts`."""

    def build(self, request: StarletteRequest) -> ServerCallContext:
        context = super().build(request)
        if isinstance(request, ParsedRequest):
            context.state[FACTS_STATE] = request.facts
        return context


async def read_here(read: Awaitable[T]) -> T | None:
    """The stored read, or None when the pool could not read; a database failure is a -32603."""
    try:
        return await read
    except Unavailable:
        return None
    except DatabaseError as exc:
        raise failure_error(exc, "read") from None


def stored_result(read: StoredTask | StoredPage) -> Any:
    """The read's result as the SDK writes it, the stored forms as `orjson.Fragment`s."""
    if isinstance(read, StoredTask):
        return orjson.Fragment(read.text)
    result = serialize_list_tasks_response(read.response(), read.include_artifacts)
    result["tasks"] = [orjson.Fragment(text) for text in read.tasks]
    return result
