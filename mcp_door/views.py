"""`GET /mcp/cairn_mcp.py`: the local MCP server, with this site's URL as its default `CAIRN_URL`."""

from __future__ import annotations

import json
import re
from functools import cache

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

from core.site import site_url

LOCAL_SERVER = settings.BASE_DIR / "mcp" / "cairn_mcp.py"
_DEFAULT_URL_LINE = re.compile(r'^DEFAULT_CAIRN_URL = "[^"\n]*"$', re.MULTILINE)


@cache
def _source() -> str:
    source = LOCAL_SERVER.read_text(encoding="utf-8")
    if len(_DEFAULT_URL_LINE.findall(source)) != 1:
        raise RuntimeError(f"{LOCAL_SERVER} must set DEFAULT_CAIRN_URL on exactly one line")
    return source


def local_server_source(url: str) -> str:
    """The file with `url` as its default server. JSON's string escapes are valid Python, so the
    URL is written as a literal whatever it holds."""
    line = f"DEFAULT_CAIRN_URL = {json.dumps(url.rstrip('/'))}"
    return _DEFAULT_URL_LINE.sub(lambda _match: line, _source())


@require_safe
def local_server_file(request: HttpRequest) -> HttpResponse:
    response = HttpResponse(
        local_server_source(site_url(request)), content_type="text/x-python; charset=utf-8"
    )
    response["Content-Disposition"] = 'inline; filename="cairn_mcp.py"'
    return response
