"""The numbers and words every door states, in one place. Values the settings own are read on
each call, so `override_settings` and the environment reach every door alike. Each status
vocabulary maps a door's words for a list to the statuses stored on the rows (None: every status).
"""

from __future__ import annotations

import importlib.metadata
import tomllib
from collections.abc import Mapping
from functools import cache
from typing import Literal

from django.conf import settings

# The most items one page holds, whichever door lists tasks or calls (SPEC §7, §8, §9).
PAGE_CAP = 50
# The challenge that answers a missing or bad token, with the realm to authenticate in (SPEC §6).
WWW_AUTHENTICATE = 'Bearer realm="cairn"'
# Links whose target an agent chose, on the pages and in the keeper's admin: no endorsement, no
# referrer window, no ranking credit.
AGENT_LINK_REL = "nofollow ugc noopener"

# A task's stored status (SPEC §8.4): working while open, then completed or failed.
TASK_WORKING = "working"
TASK_COMPLETED = "completed"
TASK_FAILED = "failed"
# A call's stored status (SPEC §7).
CALL_OPEN = "open"
CALL_CLOSED = "closed"

# `?mode=` of the HTTP API's lists, the pages and the published OpenAPI document.
TASK_MODES: Mapping[str, frozenset[str] | None] = {
    "open": frozenset({TASK_WORKING}),
    "evaluated": frozenset({TASK_COMPLETED, TASK_FAILED}),
    "all": None,
}
CALL_MODES: Mapping[str, frozenset[str] | None] = {
    "open": frozenset({CALL_OPEN}),
    "closed": frozenset({CALL_CLOSED}),
    "all": None,
}
# The mode a list shows when none is asked for, in the HTTP API and on the pages (offered first).
DEFAULT_MODE = "all"

# `status` of the MCP `cairn_a2a_tasks` tool, hosted and local (SPEC §10). The tool's argument
# model takes its words from the Literal, the selector its statuses from the mapping.
McpTaskStatus = Literal["open", "completed", "failed"]
MCP_TASK_STATUSES: Mapping[McpTaskStatus, frozenset[str]] = {
    "open": frozenset({TASK_WORKING}),
    "completed": frozenset({TASK_COMPLETED}),
    "failed": frozenset({TASK_FAILED}),
}

# `status` of A2A `ListTasks`, by the name of its `TaskState` (SPEC §8.5); unset lists every task.
A2A_TASK_STATES: Mapping[str, frozenset[str]] = {
    "TASK_STATE_WORKING": frozenset({TASK_WORKING}),
    "TASK_STATE_COMPLETED": frozenset({TASK_COMPLETED}),
    "TASK_STATE_FAILED": frozenset({TASK_FAILED}),
}


def body_limit() -> int:
    """The largest request body any door reads, in bytes (SPEC §6: `payload_too_large` above it)."""
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


@cache
def cairn_version() -> str:
    """The version every door reports: pyproject.toml in a source tree, so a changed version is
    reported without a reinstall, else the installed metadata."""
    pyproject = settings.BASE_DIR / "pyproject.toml"
    if pyproject.is_file():
        with pyproject.open("rb") as file:
            return tomllib.load(file)["project"]["version"]
    return importlib.metadata.version("cairn")
