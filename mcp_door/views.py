"""`GET /mcp/cairn_mcp.py`: the local MCP server, with this site's URL as its default `CAIRN_URL`."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

from core.scripts import script_response
from core.site import site_url

LOCAL_SERVER = settings.BASE_DIR / "mcp" / "cairn_mcp.py"


@require_safe
def local_server_file(request: HttpRequest) -> HttpResponse:
    return script_response(LOCAL_SERVER, site_url(request))
