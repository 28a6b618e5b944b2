"""The A2A gRPC binding (SPEC §8.7): the SDK's own `GrpcHandler` over the request handler every
binding shares, plus what the SDK leaves to the server, asked of `a2a_gateway.transport` as every
binding asks it and placed where SPEC §8.2 wants it: the Bearer token of SendMessage
(`UNAUTHENTICATED` before the version, so a call without one never reaches the domain) and the
`a2a-version` metadata (before the params). Reads are the handler's, which asks the door's one
read: the same stored Task, proto for proto.

The two reads run as the ASGI app runs them (`a2a_gateway.asgi`): the statement on the read pool,
on this server's event loop, where the pool serves (PostgreSQL), and through Django otherwise.
Where JSON-RPC serves the stored text as it is, gRPC needs the Task as a proto, and protobuf's
JSON parser is pure Python (~350 µs for a stored Task, ~170 µs for a page's item: a page of 50
cost ~9 ms, ten times what JSON-RPC spends on the whole page). So each stored text is parsed
once (`StoredTasks`): a text is the form `a2a_gateway.forms` wrote, one text parses to one Task,
and a text read again is answered from its wire form, kept beside it.

grpcio gives a call no request object to carry what the checks learned, and the SDK builds its
call context synchronously, so the checks run in a server interceptor that wraps each method of
the A2A service and hands the agent to `GrpcContextBuilder` through a context variable, which the
SDK reads in the same task. The handler then sees what it sees over JSON-RPC. Each call runs
inside Django's request signals, as the ASGI app's work does, so its connections are checked
before and given back after, and is counted by method and status code.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeAlias

import grpc
import orjson
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.grpc_handler import (
    DefaultGrpcServerCallContextBuilder,
    GrpcHandler,
)
from a2a.types import GetTaskRequest, ListTasksRequest, ListTasksResponse, Task, a2a_pb2
from a2a.utils.errors import A2AError
from google.protobuf.json_format import ParseDict

from a2a_gateway import read_pool
from a2a_gateway.handler import AGENT_STATE, ORIGIN_STATE, CairnRequestHandler
from a2a_gateway.reads import read_page, read_task
from a2a_gateway.transport import (
    AUTHENTICATED_METHODS,
    AgentUser,
    DjangoCycle,
    TokenRefusal,
    token_agent,
    version_error,
)
from agents.models import Agent
from core.metrics import grpc_call_observed
from core.site import site_url

SERVICE = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"].full_name
# The methods whose reads send Django's request signals themselves, only when they go through
# Django: the others run inside them from the start of the call.
STORED_READS = frozenset({"GetTask", "ListTasks"})

# A method's behaviour as grpcio holds it: (request, context) -> answer, or an async iterator of
# answers for a streaming method.
Behaviour = Callable[..., Any]
# Generic only in the type stubs, so named as a string.
MethodHandler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"


@dataclass(frozen=True)
class CallFacts:
    """What the checks learned of a call, for the handler: the agent of its Bearer token
    (SendMessage) and the site's origin, for the links a refusal gives."""

    agent: Agent | None
    origin: str


_CALL_FACTS: ContextVar[CallFacts | None] = ContextVar("cairn_grpc_call_facts", default=None)


class Unauthenticated(Exception):
    """No valid Bearer token on a call that needs one: gRPC's UNAUTHENTICATED, which is not an
    A2A error (A2A 1.0 leaves authentication to the binding) and so carries no ErrorInfo."""


class GrpcContextBuilder(DefaultGrpcServerCallContextBuilder):
    """The SDK's context for a gRPC call, plus the call's `CallFacts`, in the state keys the
    handler reads on every binding."""

    def build(self, context: grpc.aio.ServicerContext) -> ServerCallContext:
        built = super().build(context)
        facts = _CALL_FACTS.get()
        if facts is not None:
            built.state[ORIGIN_STATE] = facts.origin
            if facts.agent is not None:
                built.user = AgentUser(facts.agent)
                built.state[AGENT_STATE] = facts.agent
        return built


class StoredTasks:
    """Stored Task texts and the wire form of the Task each parses to, up to `max_chars` of text
    and wire form in all, the least recently read dropped first. A text is the whole key, so what
    is kept can never differ from what parsing the text again would give; an open task's text
    changes with each contribution, and its former text is simply never asked for again. Used
    on the server's one event loop only."""

    def __init__(self, max_chars: int = 16 * 1024 * 1024) -> None:
        self.max_chars = max_chars
        self._wire: OrderedDict[str, bytes] = OrderedDict()
        self._chars = 0

    def wire(self, text: str) -> bytes:
        """The serialised Task that `text` (a stored form) parses to."""
        found = self._wire.get(text)
        if found is not None:
            self._wire.move_to_end(text)
            return found
        found = ParseDict(orjson.loads(text), Task()).SerializeToString()
        self._wire[text] = found
        self._chars += len(text) + len(found)
        while self._chars > self.max_chars:
            dropped, wire = self._wire.popitem(last=False)
            self._chars -= len(dropped) + len(wire)
        return found


STORED_TASKS = StoredTasks()


@asynccontextmanager
async def _django_cycle() -> AsyncIterator[None]:
    cycle = DjangoCycle(inside_already=False)
    await cycle.enter()
    try:
        yield
    finally:
        await cycle.leave()


class GrpcRequestHandler(CairnRequestHandler):
    """The request handler every binding dispatches to, with its two reads answered as the ASGI
    app answers them: on the read pool where it serves, each stored text parsed once
    (`StoredTasks`). Where the pool cannot read (not PostgreSQL, or failing), the handler's own
    read answers, through Django inside its request signals, and a database outage is the
    handler's internal error as on every binding. A refusal is the read's, on either path."""

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        if read_pool.is_available():
            try:
                text = await read_task(params, read_pool.POOL_SOURCE)
            except A2AError:
                raise
            except Exception:  # noqa: S110 - answered through Django below
                pass
            else:
                return Task.FromString(STORED_TASKS.wire(text))
        async with _django_cycle():
            return await super().on_get_task(params, context)

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        if read_pool.is_available():
            try:
                page = await read_page(params, None, read_pool.POOL_SOURCE)
            except A2AError:
                raise
            except Exception:  # noqa: S110 - answered through Django below
                pass
            else:
                response = ListTasksResponse(
                    next_page_token=page.next_cursor,
                    page_size=page.page_size,
                    total_size=page.total,
                )
                for text in page.tasks:
                    response.tasks.add().MergeFromString(STORED_TASKS.wire(text))
                return response
        async with _django_cycle():
            return await super().on_list_tasks(params, context)


def grpc_handler() -> GrpcHandler:
    """The SDK's servicer of the A2A service over the request handler every binding dispatches to,
    with the reads of `GrpcRequestHandler`."""
    return GrpcHandler(GrpcRequestHandler(), context_builder=GrpcContextBuilder())


def call_metadata(context: grpc.aio.ServicerContext) -> dict[str, str]:
    """The call's text metadata, keys lower-cased; a key sent twice has its values joined with
    commas, as HTTP joins a repeated header (so two `authorization` entries are no token)."""
    found: dict[str, str] = {}
    for key, value in context.invocation_metadata() or ():
        name = key.lower()
        if name.endswith("-bin"):
            continue
        text = value if isinstance(value, str) else value.decode("latin-1")
        found[name] = f"{found[name]},{text}" if name in found else text
    return found


async def _agent(method: str, metadata: Mapping[str, str], cycle: DjangoCycle) -> Agent:
    """The agent of the call's Bearer token (the `authorization` metadata); raises
    `Unauthenticated` without a valid one, and the SDK's internal error while the database cannot
    say (SPEC §16)."""
    found = await token_agent(metadata, method, cycle)
    if not isinstance(found, TokenRefusal):
        return found
    if found.unauthenticated:
        raise Unauthenticated(found.error.message)
    raise found.error


async def call_facts(
    method: str, context: grpc.aio.ServicerContext, cycle: DjangoCycle
) -> CallFacts:
    """SPEC §8.2's checks in their order: the token (SendMessage only), then the version.
    Raises `Unauthenticated` or the SDK's A2A error."""
    metadata = call_metadata(context)
    agent = await _agent(method, metadata, cycle) if method in AUTHENTICATED_METHODS else None
    refused = await version_error(metadata)
    if refused is not None:
        raise refused
    return CallFacts(agent=agent, origin=site_url())


def _code_name(context: grpc.aio.ServicerContext, finished: bool) -> str:
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code.name
    if code is None:
        return "OK" if finished else "UNKNOWN"
    return next((known.name for known in grpc.StatusCode if known.value[0] == code), "UNKNOWN")


@dataclass
class _Outcome:
    finished: bool = False  # the behaviour returned, rather than raised or was cut


class A2ACalls(grpc.aio.ServerInterceptor):
    """Wraps every method of the A2A service in the checks, Django's request signals and the
    metrics; other services (health) pass untouched."""

    def __init__(self, servicer: GrpcHandler) -> None:
        self.servicer = servicer
        self._wrapped: dict[str, MethodHandler] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[MethodHandler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> MethodHandler | None:
        full_name = handler_call_details.method
        wrapped = self._wrapped.get(full_name)
        if wrapped is not None:
            return wrapped
        handler = await continuation(handler_call_details)
        service, _, method = full_name.lstrip("/").rpartition("/")
        if handler is None or service != SERVICE:
            return handler
        if handler.unary_unary is not None:
            wrapped = grpc.unary_unary_rpc_method_handler(
                self._unary(method, handler.unary_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        elif handler.unary_stream is not None:
            wrapped = grpc.unary_stream_rpc_method_handler(
                self._streaming(method, handler.unary_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        else:
            return handler
        self._wrapped[full_name] = wrapped
        return wrapped

    async def _checked(
        self, method: str, context: grpc.aio.ServicerContext, cycle: DjangoCycle
    ) -> CallFacts:
        """The call's facts, or the call aborted with the binding's answer to a failed check."""
        if method not in STORED_READS:
            await cycle.enter()
        try:
            return await call_facts(method, context, cycle)
        except Unauthenticated as refused:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, str(refused))
        except A2AError as refused:
            await self.servicer.abort_context(refused, context)
        raise AssertionError("unreachable: an aborted call raises")

    @asynccontextmanager
    async def _call(
        self, method: str, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[_Outcome]:
        """One call of either kind: the checks, their facts for the handler, Django's request
        signals around it, and its metric when it ends, answered or not."""
        started, outcome = time.perf_counter(), _Outcome()
        cycle = DjangoCycle(inside_already=False)
        try:
            token = _CALL_FACTS.set(await self._checked(method, context, cycle))
            try:
                yield outcome
            finally:
                _CALL_FACTS.reset(token)
        finally:
            await cycle.leave()
            code = _code_name(context, outcome.finished)
            grpc_call_observed(method, code, time.perf_counter() - started)

    def _unary(self, method: str, behaviour: Behaviour) -> Behaviour:
        async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
            async with self._call(method, context) as outcome:
                answer = await behaviour(request, context)
                outcome.finished = True
                return answer

        return call

    def _streaming(self, method: str, behaviour: Behaviour) -> Behaviour:
        async def call(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            async with self._call(method, context) as outcome:
                async for item in behaviour(request, context):
                    yield item
                outcome.finished = True

        return call
