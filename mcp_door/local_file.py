"""`/mcp/cairn_mcp.py`: `local_mcp/cairn_mcp.py` built into one file (`core.amalgam`), its previews
checking the server's schemas (SPEC §10). The repository's source holds them too (`manage.py
write_local_mcp`), so a build from it gives the served bytes but for the site's URL."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from core.amalgam import amalgamated
from core.payloads import HIDDEN_CLASS
from core.policy import A2A_TASK_STATES, MCP_TASK_STATUSES, cairn_version
from core.scripts import requirements_response, script_for_site, script_response
from core.site import read_only, site_url
from mcp_door.server import TOOLS
from tasks.payloads import ContributionPayload, OpenTaskRequest

LOCAL_SERVER = settings.BASE_DIR / "local_mcp" / "cairn_mcp.py"
# The default the repository's file keeps: a development server on this machine.
REPOSITORY_URL = "http://127.0.0.1:8000"


def report_schema() -> dict[str, Any]:
    """The contribution's schema without its approval, which the local server adds."""
    schema = ContributionPayload.model_json_schema(by_alias=True)
    del schema["properties"]["approval"]
    schema["required"].remove("approval")
    del schema["$defs"]["ContributionApproval"]
    if not schema["$defs"]:
        del schema["$defs"]
    return schema


def _json_literal(value: Any) -> str:
    """A JSON value as a one-line raw string literal: JSON's own escapes pass through unchanged,
    and JSON text never holds three quotes in a row, so the literal cannot end early."""
    return f'r"""{json.dumps(value, ensure_ascii=True)}"""'


@cache
def server_values() -> dict[str, str]:
    tools = {
        name: {"description": tool.description, "input_schema": tool.arguments.model_json_schema()}
        for name, tool in TOOLS.items()
    }
    # Each `status` of cairn_a2a_tasks → the A2A state that lists the same tasks.
    by_statuses = {statuses: name for name, statuses in A2A_TASK_STATES.items()}
    states = {word: by_statuses[statuses] for word, statuses in MCP_TASK_STATUSES.items()}
    return {
        "SERVER_REQUEST_SCHEMA": _json_literal(OpenTaskRequest.model_json_schema(by_alias=True)),
        "SERVER_REPORT_SCHEMA": _json_literal(report_schema()),
        # JSON's string escapes are Python's too.
        "VERSION": json.dumps(cairn_version()),
        "SERVER_HIDDEN_CLASS": json.dumps(HIDDEN_CLASS),
        "SERVER_READ_TOOLS": _json_literal(tools),
        "SERVER_TASK_STATES": _json_literal(states),
    }


@cache
def local_server_built() -> str:
    return amalgamated(LOCAL_SERVER)


def repository_source() -> str:
    return script_for_site(
        LOCAL_SERVER.read_text(encoding="utf-8"), REPOSITORY_URL, server_values()
    )


@read_only
def local_server_file(request: HttpRequest) -> HttpResponse:
    return script_response(
        LOCAL_SERVER.name, local_server_built(), site_url(request), server_values()
    )


@read_only
def local_server_requirements(request: HttpRequest) -> HttpResponse:
    return requirements_response(local_server_built())
