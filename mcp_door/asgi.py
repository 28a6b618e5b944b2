"""`/api/mcp`: the MCP SDK's streamable HTTP transport, stateless, JSON answers. Its session
manager runs only once and needs a task group, so `lifespan()` makes one per start of the server.
The SDK's DNS-rebinding guard matches fixed strings only, so Django's rule replaces it: the Host
must be one Django would serve, or loopback with any port. Origin is not checked: the endpoint
holds no identity and no cookie and serves only what every other door shows publicly."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.types import PARSE_ERROR, ErrorData, JSONRPCError
from starlette.datastructures import Headers
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import Message, Receive, Scope, Send

from core.errors import method_not_allowed
from core.json_input import InvalidJson, parse_json
from core.policy import body_limit
from mcp_door.server import server

PATH = "/api/mcp"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def is_mcp_path(path: str) -> bool:
    return path == PATH or path == PATH + "/"


def host_allowed(scope: Scope) -> bool:
    domain, _port = split_domain_port(Headers(scope=scope).get("host", ""))
    site_host = urlsplit(settings.CAIRN_SITE_URL).hostname or ""
    allowed = (*settings.ALLOWED_HOSTS, *LOOPBACK_HOSTS, site_host)
    return bool(domain) and validate_host(domain, allowed)


class McpEndpoint:
    _manager: StreamableHTTPSessionManager | None = None

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        manager = StreamableHTTPSessionManager(
            app=server,
            stateless=True,
            json_response=True,
            security_settings=None,  # the Host check below replaces it
            max_request_body_size=body_limit(),
        )
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not host_allowed(scope):
            await PlainTextResponse("Invalid Host header", status_code=421)(scope, receive, send)
            return
        if scope["method"] != "POST":
            # Stateless: no session to delete, and an idle GET stream would only hold a connection
            # open (MCP lets a server answer GET with 405).
            refusal = method_not_allowed(scope["method"], ["POST"]).as_body()
            allow = {"Allow": "POST"}
            await JSONResponse(refusal, status_code=405, headers=allow)(scope, receive, send)
            return
        if self._manager is None:
            message = "The MCP endpoint needs the ASGI lifespan (run the server with lifespan on)."
            await PlainTextResponse(message, status_code=503)(scope, receive, send)
            return
        received, body = await _read_body(receive)
        if body is not None:
            try:
                parse_json(body)
            except InvalidJson as error:
                await _parse_error(str(error))(scope, receive, send)
                return
        replay = iter(received)

        async def replayed() -> Message:
            return next(replay, None) or await receive()

        await self._manager.handle_request(scope, replayed, send)


async def _read_body(receive: Receive) -> tuple[list[Message], bytes | None]:
    """The messages read, and the body if within the limit (else None: the SDK refuses it)."""
    received: list[Message] = []
    size = 0
    while True:
        message = await receive()
        received.append(message)
        if message["type"] != "http.request":
            return received, None
        size += len(message.get("body", b""))
        if size > body_limit():
            return received, None
        if not message.get("more_body", False):
            return received, b"".join(item.get("body", b"") for item in received)


def _parse_error(text: str) -> Response:
    """A JSON-RPC parse error, as the SDK answers a body that is not JSON, for one that the rule
    every door shares refuses (deeper than 64 levels, a lone surrogate)."""
    error = JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=PARSE_ERROR, message=text))
    return Response(
        error.model_dump_json(by_alias=True, exclude_unset=True),
        status_code=400,
        media_type="application/json",
    )


endpoint = McpEndpoint()
