"""`GET /mcp/cairn_mcp.py`: the local MCP server, with this site's URL as its default `CAIRN_URL`."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

from core.scripts import script_for_site
from core.site import site_url

LOCAL_SERVER = settings.BASE_DIR / "mcp" / "cairn_mcp.py"


def local_server_source(url: str) -> str:
    return script_for_site(LOCAL_SERVER, url)


@require_safe
def local_server_file(request: HttpRequest) -> HttpResponse:
    response = HttpResponse(
        local_server_source(site_url(request)), content_type="text/x-python; charset=utf-8"
    )
    response["Content-Disposition"] = 'inline; filename="cairn_mcp.py"'
    return response
