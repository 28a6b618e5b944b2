"""The single-file scripts Cairn serves (the local MCP server, the offline verifier), each with
the serving site's URL as its default."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

from django.http import HttpResponse

_DEFAULT_URL_LINE = re.compile(r'^DEFAULT_CAIRN_URL = "[^"\n]*"$', re.MULTILINE)


@cache
def _source(path: Path) -> str:
    source = path.read_text(encoding="utf-8")
    if len(_DEFAULT_URL_LINE.findall(source)) != 1:
        raise RuntimeError(f"{path} must set DEFAULT_CAIRN_URL on exactly one line")
    return source


def script_for_site(path: Path, url: str) -> str:
    """The file with `url` as its default server. JSON's string escapes are valid Python, so the
    URL is written as a literal whatever it holds."""
    line = f"DEFAULT_CAIRN_URL = {json.dumps(url.rstrip('/'))}"
    return _DEFAULT_URL_LINE.sub(lambda _match: line, _source(path))


def script_response(path: Path, url: str) -> HttpResponse:
    """The file for `url`'s site, as Python to read in a browser or save and run, under its own name."""
    response = HttpResponse(script_for_site(path, url), content_type="text/x-python; charset=utf-8")
    response["Content-Disposition"] = f'inline; filename="{path.name}"'
    return response
