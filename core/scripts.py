"""The single-file scripts Cairn serves (the local MCP server, the offline verifier), each with
the serving site's URL as its default and, where a script needs them, the server's own values."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping

from django.http import HttpResponse

URL_NAME = "DEFAULT_CAIRN_URL"
# PEP 723's reference expression for a script's metadata block.
_METADATA = re.compile(r"(?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$")


def script_dependencies(source: str) -> list[str]:
    """The requirements a script's PEP 723 header names, written once there: what `uv run`
    installs, and what `requirements_response` serves to whoever runs it with their own Python."""
    for block in _METADATA.finditer(source):
        if block["type"] == "script":
            content = "".join(
                line[2:] if line.startswith("# ") else line[1:]
                for line in block["content"].splitlines(keepends=True)
            )
            return [str(item) for item in tomllib.loads(content).get("dependencies", [])]
    raise RuntimeError("a served file must carry a PEP 723 script header")


def requirements_response(source: str) -> HttpResponse:
    """A script's requirements as a pip requirements file, for `pip install -r <URL>`."""
    text = "".join(f"{requirement}\n" for requirement in script_dependencies(source))
    return HttpResponse(text, content_type="text/plain; charset=utf-8")


def script_for_site(source: str, url: str, values: Mapping[str, str] | None = None) -> str:
    """The built file (`core.amalgam`) with `url` as its default server (a JSON string, a valid
    Python literal whatever it holds) and each name of `values` set to its Python expression."""
    for name, expression in {URL_NAME: json.dumps(url.rstrip("/")), **(values or {})}.items():
        # Backslashes doubled, so `re` reads no escapes in the line.
        line = f"{name} = {expression}".replace("\\", "\\\\")
        source, found = re.subn(rf"^{name} = .*$", line, source, flags=re.MULTILINE)
        if found != 1:
            raise RuntimeError(f"a served file must set {name} on exactly one line")
    return source


def script_response(
    name: str, source: str, url: str, values: Mapping[str, str] | None = None
) -> HttpResponse:
    """The file for `url`'s site, as Python to read in a browser or save and run, under its own name."""
    response = HttpResponse(
        script_for_site(source, url, values), content_type="text/x-python; charset=utf-8"
    )
    response["Content-Disposition"] = f'inline; filename="{name}"'
    return response
