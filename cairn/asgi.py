"""Cairn's ASGI application: Django, but for `/api/mcp` (the MCP SDK's) and the A2A endpoint and
card (the A2A door's own app, without Django's request cycle). Django's handler takes no lifespan
events, so this router answers them: it runs the MCP session manager while the server runs and
closes the A2A door's read pool at the end.
"""

import contextlib

from django.core.asgi import get_asgi_application

from cairn.startup import load_settings

load_settings()

django_application = get_asgi_application()

# Django must be set up before the doors import the selectors and models.
from a2a_gateway import read_connections  # noqa: E402
from a2a_gateway.asgi import endpoint as a2a_endpoint  # noqa: E402
from a2a_gateway.asgi import is_a2a_path  # noqa: E402
from core.metrics import with_request_metrics  # noqa: E402
from core.middleware import with_hsts  # noqa: E402
from mcp_door.asgi import endpoint as mcp_endpoint  # noqa: E402
from mcp_door.asgi import is_mcp_path  # noqa: E402

# Django's SecurityMiddleware sends HSTS on the paths it serves; these two are served without it.
a2a_door = with_hsts(a2a_endpoint)
mcp_door = with_hsts(mcp_endpoint)


async def _lifespan(receive, send) -> None:
    stack = contextlib.AsyncExitStack()
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            try:
                await stack.enter_async_context(mcp_endpoint.lifespan())
            except Exception as exc:  # noqa: BLE001  (ASGI: report any start-up failure)
                await send({"type": "lifespan.startup.failed", "message": str(exc)})
                return
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await stack.aclose()
            await read_connections.close()
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _route(scope, receive, send) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
    elif scope["type"] == "http" and is_a2a_path(scope["path"]):
        await a2a_door(scope, receive, send)
    elif scope["type"] == "http" and is_mcp_path(scope["path"]):
        await mcp_door(scope, receive, send)
    else:
        await django_application(scope, receive, send)


application = with_request_metrics(_route)
