"""`GET /mcp/cairn_mcp.py`: the local MCP server, with this site's URL as its default `CAIRN_URL`
and the server's own schemas; `GET /mcp/requirements.txt`: the dependencies its header names."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

from core.scripts import requirements_response, script_response
from core.site import site_url
from mcp_door.local_file import LOCAL_SERVER, local_server_built, server_values


@require_safe
def local_server_file(request: HttpRequest) -> HttpResponse:
    return script_response(
        LOCAL_SERVER.name, local_server_built(), site_url(request), server_values()
    )


@require_safe
def local_server_requirements(request: HttpRequest) -> HttpResponse:
    return requirements_response(local_server_built())
