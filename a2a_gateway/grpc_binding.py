"""The A2A gRPC binding (SPEC §8.7): the SDK's `GrpcHandler` over the shared request handler. grpcio
gives a call no request object and the SDK builds its call context synchronously, so `transport`'s
checks run in a server interceptor that hands their facts to `GrpcContextBuilder` in a context
variable. protobuf's pure-Python JSON parser costs more than a whole stored read, so each stored
text's wire form is kept (`StoredForms`); a page is its items' wire forms, each a one-task
`ListTasksResponse`, joined with its own fields: protobuf reads concatenated messages as one.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Never, TypeAlias

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
from google.protobuf.message import Message

from a2a_gateway import read_connections, transport
from a2a_gateway.handler import FACTS_STATE, AsSent, Facts
from a2a_gateway.kept_forms import Kept
from a2a_gateway.request_cycle import DjangoCycle
from a2a_gateway.stored_reads import StoredTask, stored_read
from core.metrics import grpc_call_observed
from core.orm_threads import orm_thread
from core.site import site_url

SERVICE = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"].full_name
# Answered from the stored forms, outside Django's request signals unless the servicer answers.
STORED_READS = frozenset({"GetTask", "ListTasks"})

# (request, context) -> answer, or an async iterator of answers for a streaming method.
Behaviour = Callable[..., Any]
# Generic only in the type stubs, so named as a string.
MethodHandler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"


_CALL_FACTS: ContextVar[Facts | None] = ContextVar("cairn_grpc_call_facts", default=None)


class GrpcContextBuilder(DefaultGrpcServerCallContextBuilder):
    """The SDK's context for a gRPC call, plus the call's `Facts`."""

    def build(self, context: grpc.aio.ServicerContext) -> ServerCallContext:
        built = super().build(context)
        if (facts := _CALL_FACTS.get()) is not None:
            built.state[FACTS_STATE] = facts
        return built


class StoredForms(Kept[str, bytes]):
    """Each stored text's wire form, up to `max_bytes` of both; keyed by the text, never stale."""

    def __init__(self, wrap: Callable[[Task], Message], max_bytes: int = 8 * 1024 * 1024) -> None:
        super().__init__(max_bytes, lambda text, wire: len(text) + len(wire))
        self.wrap = wrap

    def wire(self, text: str) -> bytes:
        if (found := self.get(text)) is None:
            found = self.wrap(ParseDict(orjson.loads(text), Task())).SerializeToString()
            self.keep(text, found)
        return found


STORED_TASKS = StoredForms(lambda task: task)
STORED_ITEMS = StoredForms(lambda task: ListTasksResponse(tasks=[task]))


async def stored_answer(request: GetTaskRequest | ListTasksRequest) -> bytes | None:
    """The answer's wire form, read on the pool; None leaves it to the servicer."""
    if not read_connections.is_available():
        return None
    read = await transport.read_here(stored_read(request, None, read_connections.POOL_SOURCE))
    if read is None:
        return None
    if isinstance(read, StoredTask):
        return STORED_TASKS.wire(read.text)
    return b"".join(map(STORED_ITEMS.wire, read.tasks)) + read.response().SerializeToString()


def _as_stored(serialize: Callable[[Any], bytes] | None) -> Callable[[Any], bytes]:
    """A method's serialiser that sends a stored answer's wire form as it is."""
    return lambda answer: (
        answer if isinstance(answer, bytes) or serialize is None else serialize(answer)
    )


def grpc_handler() -> GrpcHandler:
    return GrpcHandler(transport.REQUEST_HANDLER, context_builder=GrpcContextBuilder())


def call_metadata(context: grpc.aio.ServicerContext) -> dict[str, str]:
    """The call's text metadata, keys lower-cased, a repeated key's values joined with commas as
    HTTP joins a repeated header (so two `authorization` entries are no token)."""
    found: dict[str, str] = {}
    for key, value in context.invocation_metadata() or ():
        name = key.lower()
        if name.endswith("-bin"):
            continue
        text = value if isinstance(value, str) else value.decode("latin-1")
        found[name] = f"{found[name]},{text}" if name in found else text
    return found


def _code_name(context: grpc.aio.ServicerContext, finished: bool) -> str:
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code.name
    if code is None:
        return "OK" if finished else "UNKNOWN"
    return next((known.name for known in grpc.StatusCode if known.value[0] == code), "UNKNOWN")


@dataclass
class _Outcome:
    cycle: DjangoCycle
    finished: bool = False  # the behaviour returned, rather than raised or was cut


class A2ACalls(grpc.aio.ServerInterceptor):
    """The A2A service's methods in the checks, Django's request signals and the metrics."""

    def __init__(self, servicer: GrpcHandler) -> None:
        self.servicer = servicer
        self._wrapped: dict[str, MethodHandler] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[MethodHandler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> MethodHandler | None:
        full_name = handler_call_details.method
        if (wrapped := self._wrapped.get(full_name)) is not None:
            return wrapped
        handler = await continuation(handler_call_details)
        service, _, method = full_name.lstrip("/").rpartition("/")
        if handler is None or service != SERVICE:
            return handler
        serializer = handler.response_serializer
        if handler.unary_unary is not None:
            stored = method in STORED_READS
            wrapped = grpc.unary_unary_rpc_method_handler(
                self._unary(method, handler.unary_unary, stored=stored),
                request_deserializer=handler.request_deserializer,
                response_serializer=_as_stored(serializer) if stored else serializer,
            )
        elif handler.unary_stream is not None:
            wrapped = grpc.unary_stream_rpc_method_handler(
                self._streaming(method, handler.unary_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=serializer,
            )
        else:
            return handler
        self._wrapped[full_name] = wrapped
        return wrapped

    async def _abort(self, refused: A2AError, context: grpc.aio.ServicerContext) -> Never:
        await self.servicer.abort_context(refused, context)
        raise AssertionError("unreachable: an aborted call raises")

    async def _checked(
        self, method: str, context: grpc.aio.ServicerContext, cycle: DjangoCycle
    ) -> Facts:
        """SPEC §8.2's checks, the token then the version: the call's facts, or the call aborted."""
        metadata = call_metadata(context)
        try:
            agent = await transport.token_agent(metadata, method, cycle)
            await transport.check_version(metadata)
        except transport.Unauthenticated as refused:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, str(refused))
        except A2AError as refused:
            await self._abort(refused, context)
        return Facts(agent=agent, origin=site_url(), as_sent=AsSent(), cycle=cycle)

    @asynccontextmanager
    async def _call(
        self, method: str, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[_Outcome]:
        """One call: the checks, their facts for the handler, and its metric, answered or not."""
        started = time.perf_counter()
        outcome = _Outcome(DjangoCycle(inside_already=False))
        with orm_thread():
            try:
                token = _CALL_FACTS.set(await self._checked(method, context, outcome.cycle))
                try:
                    yield outcome
                finally:
                    _CALL_FACTS.reset(token)
            finally:
                await outcome.cycle.leave()
                code = _code_name(context, outcome.finished)
                grpc_call_observed(method, code, time.perf_counter() - started)

    def _unary(self, method: str, behaviour: Behaviour, *, stored: bool) -> Behaviour:
        async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
            async with self._call(method, context) as outcome:
                try:
                    answer = await stored_answer(request) if stored else None
                except A2AError as refused:
                    await self._abort(refused, context)
                if answer is None:
                    await outcome.cycle.enter()
                    answer = await behaviour(request, context)
                outcome.finished = True
                return answer

        return call

    def _streaming(self, method: str, behaviour: Behaviour) -> Behaviour:
        async def call(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            async with self._call(method, context) as outcome:
                await outcome.cycle.enter()
                async for item in behaviour(request, context):
                    yield item
                outcome.finished = True

        return call
