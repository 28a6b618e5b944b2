# /// script
# requires-python = ">=3.11"
# dependencies = [
#     "mcp~=2.3.0",
#     "a2a-sdk~=1.3.0",
#     "cryptography>=47",
#     "httpx>=0.28.1,<1",
#     "orjson>=3.10",
#     "pycryptodome>=3.20",
#     "rfc8785~=0.1.4",
# ]
# ///
"""Cairn's local MCP server: read, post and contribute to source-review tasks from your coding agent.

One file, stdio transport. Start it with `uv run cairn_mcp.py` or `pipx run cairn_mcp.py`
(the header above names its dependencies). Writes go through the official A2A client to
`<CAIRN_URL>/api/a2a`; nothing is written before you record consent (`cairn_local_set_consent`)
and approve the exact digest of what becomes public (`cairn_a2a_preview_task`, or
`cairn_a2a_contribute` without a digest). The local-only tools send nothing.

When the site lists keypers, a contribution is sealed here to them (SPEC §15.8): the site cannot
read it before the deadline, when any k of them release their shares of its key. Before sealing,
the site's own checks run here (shape, sources, privacy screen), and the task's entry and deadline
are checked under a checkpoint a quorum of witnesses cosigned. The witnesses and keypers trusted
are those pinned in CAIRN_HOME/verify/ (by cairn_verify.py, or here on first use, in the same
files). The report and its salt are kept to dispute a void; after the deadline, each start asks
the keypers for the releases of those still unreleased.

Environment:
  CAIRN_URL   the Cairn server (default: the site this file was downloaded from)
  CAIRN_HOME  where the token (mode 0600), the consent record, the participant card, every
              signed receipt (receipts/<contribution_id>.json), every keyper-sealed report with
              its salt and releases (sealed/<contribution_id>.json, mode 0600) and the pins
              (verify/) live (default: ~/.cairn)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
import urllib.parse
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
import httpx
import rfc8785
from a2a.client import A2ACardResolver, A2AClientError, ClientConfig, ClientFactory
from a2a.types import (
    AgentCard,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
)
from a2a.utils.errors import (
    A2AError,
    InvalidParamsError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
    create_model,
)

from core.canonical import canonical_digest, canonical_json
from core.json_input import ints_from_doubles
from core.privacy import screen
from core.wire_names import (
    CONTRIBUTION_SCHEMA,
    CONTRIBUTION_SCOPE,
    OPEN_TASK_SCHEMA,
    OPEN_TASK_SCOPE,
)
from ledger.contributor import (
    EntryProven,
    KeyperCheckpoint,
    entry_log,
    release_request,
    sealed_kept,
)
from ledger.entry_types import MAX_MERGE_DELAY, task_entry
from ledger.keyper_seal import (
    Keyper,
    b64u_decode,
    ciphertext_digest,
    release_claims,
    release_verify,
)
from ledger.merkle import inclusion_verify, leaf_hash
from ledger.pins import (
    LogListed,
    card_trust,
    keypers_differ,
    logs_listed,
    pins_completed,
    site_keys,
    witness_key,
)
from ledger.signed_note import (
    NoteError,
    VerifierKey,
    checkpoint_body_parse,
    checkpoint_checked,
    cosignature_verify,
    note_parse,
)
from mcp_door.answers import READ_ONLY, tool_result, tools_lister
from tasks.report_checks import report_texts, source_in_task_issues

# The server this file talks to when CAIRN_URL is not set. The site serving this file writes
# its own URL here.
DEFAULT_CAIRN_URL = "http://127.0.0.1:8000"

# Cairn's version, which the site serving this file writes here.
VERSION = "0.1.0"
CLIENT = f"cairn_mcp/{VERSION}"
PARTICIPANT_EXTENSION = "urn:cairn:participant:v1"
TIMEOUT_S = 30.0

logger = logging.getLogger("cairn_mcp")

# ---------------------------------------------------------------------------------------------
# Errors: every failure is a tool error whose text is Cairn's `{"error": {...}}` body (SPEC §6).
# ---------------------------------------------------------------------------------------------


class ToolRefusal(Exception):
    def __init__(self, code: str, message: str, issues: list[dict[str, str]] | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.body = {"error": {"code": code, "message": message, "issues": issues or []}}

    @classmethod
    def from_body(cls, body: Any, fallback: str) -> ToolRefusal:
        """The server's own refusal, passed on with its code, message and issues."""
        error = body.get("error") if isinstance(body, dict) else None
        if not isinstance(error, dict) or not isinstance(error.get("code"), str):
            return cls("server_error", fallback)
        issues = [
            {
                "path": issue.get("path", ""),
                "code": issue.get("code", ""),
                "message": issue.get("message", ""),
            }
            for issue in error.get("issues") or []
            if isinstance(issue, dict)
        ]
        return cls(error["code"], str(error.get("message", "")), issues)


# ---------------------------------------------------------------------------------------------
# The shapes of the public request and report, checked locally so a preview can show problems
# before anything is sent. The server checks everything again (and more); it has the last word.
# ---------------------------------------------------------------------------------------------

# What the server's own models say, written here by the site serving this file: the JSON Schemas
# of the request and of the report (without its approval), as JSON text, and the control and
# invisible characters no public text may hold (only the newline is allowed).
SERVER_REQUEST_SCHEMA = r"""{"$defs": {"Budget": {"additionalProperties": false, "description": "Nothing is paid on Cairn; the budget is there so the approval says so explicitly.", "properties": {"currency": {"const": "USD", "title": "Currency", "type": "string"}, "amount": {"description": "Always 0.", "maximum": 0, "minimum": 0, "title": "Amount", "type": "integer"}}, "required": ["currency", "amount"], "title": "Budget", "type": "object"}}, "additionalProperties": false, "anyOf": [{"properties": {"min_independent": {"const": 2}, "max_contributors": {"minimum": 2}}}, {"properties": {"min_independent": {"const": 3}, "max_contributors": {"minimum": 3}}}, {"properties": {"min_independent": {"const": 4}, "max_contributors": {"minimum": 4}}}, {"properties": {"min_independent": {"const": 5}, "max_contributors": {"minimum": 5}}}], "description": "The public request: exactly these eight fields are approved, hashed and published.", "properties": {"title": {"description": "A short public title.", "maxLength": 140, "minLength": 10, "pattern": "^[^\\x00-\\x09\\x0b-\\x1f\\x7f-\\x9f\\u200b-\\u200f\\u202a-\\u202e\\u2060-\\u2064\\u2066-\\u2069\\ufeff]*$", "title": "Title", "type": "string"}, "question": {"description": "The checkable question, answered from the sources alone.", "maxLength": 2000, "minLength": 20, "pattern": "^[^\\x00-\\x09\\x0b-\\x1f\\x7f-\\x9f\\u200b-\\u200f\\u202a-\\u202e\\u2060-\\u2064\\u2066-\\u2069\\ufeff]*$", "title": "Question", "type": "string"}, "sources": {"description": "1 to 10 unique https URLs on the server's source allowlist.", "items": {"description": "An https URL.", "maxLength": 500, "minLength": 1, "pattern": "^[^\\x00-\\x09\\x0b-\\x1f\\x7f-\\x9f\\u200b-\\u200f\\u202a-\\u202e\\u2060-\\u2064\\u2066-\\u2069\\ufeff]*$", "type": "string"}, "maxItems": 10, "minItems": 1, "title": "Sources", "type": "array", "uniqueItems": true}, "acceptance_criteria": {"description": "1 to 5 acceptance criteria.", "items": {"description": "One criterion a good answer meets.", "maxLength": 500, "minLength": 10, "pattern": "^[^\\x00-\\x09\\x0b-\\x1f\\x7f-\\x9f\\u200b-\\u200f\\u202a-\\u202e\\u2060-\\u2064\\u2066-\\u2069\\ufeff]*$", "type": "string"}, "maxItems": 5, "minItems": 1, "title": "Acceptance Criteria", "type": "array"}, "deadline": {"description": "A real UTC instant, exactly YYYY-MM-DDTHH:MM:SS.sssZ; 30 minutes to 7 days ahead by default (otherwise refused: deadline_out_of_range).", "format": "date-time", "pattern": "^(?:(?:000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)-02-29)T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\\.[0-9]{3}Z$", "title": "Deadline", "type": "string"}, "min_independent": {"description": "Contributions needed to evaluate.", "maximum": 5, "minimum": 2, "title": "Min Independent", "type": "integer"}, "max_contributors": {"description": "Contributions accepted at most; at least min_independent.", "maximum": 10, "minimum": 2, "title": "Max Contributors", "type": "integer"}, "budget": {"$ref": "#/$defs/Budget"}}, "required": ["title", "question", "sources", "acceptance_criteria", "deadline", "min_independent", "max_contributors", "budget"], "title": "OpenTaskRequest", "type": "object"}"""
SERVER_REPORT_SCHEMA = r"""{"additionalProperties": false, "description": "`cairn.task.contribution/0.1`: a sealed verdict with its evidence.", "properties": {"schema": {"const": "cairn.task.contribution/0.1", "title": "Schema", "type": "string"}, "verdict": {"description": "What the sources say about the question.", "enum": ["source_supported", "source_contradicted", "source_unclear"], "title": "Verdict", "type": "string"}, "summary": {"description": "The answer, with what in the sources supports it.", "maxLength": 2000, "minLength": 20, "pattern": "^[^\\x00-\\x09\\x0b-\\x1f\\x7f-\\x9f\\u200b-\\u200f\\u202a-\\u202e\\u2060-\\u2064\\u2066-\\u2069\\ufeff]*$", "title": "Summary", "type": "string"}, "conditions": {"description": "Conditions under which the verdict holds (0 to 10).", "items": {"description": "A condition.", "maxLength": 500, "minLength": 1, "pattern": "^[^\\x00-\\x09\\x0b-\\x1f\\x7f-\\x9f\\u200b-\\u200f\\u202a-\\u202e\\u2060-\\u2064\\u2066-\\u2069\\ufeff]*$", "type": "string"}, "maxItems": 10, "title": "Conditions", "type": "array"}, "attempts": {"description": "What was read or tried (1 to 10).", "items": {"description": "An attempt.", "maxLength": 500, "minLength": 1, "pattern": "^[^\\x00-\\x09\\x0b-\\x1f\\x7f-\\x9f\\u200b-\\u200f\\u202a-\\u202e\\u2060-\\u2064\\u2066-\\u2069\\ufeff]*$", "type": "string"}, "maxItems": 10, "minItems": 1, "title": "Attempts", "type": "array"}, "limitations": {"description": "What was not checked (0 to 10).", "items": {"description": "A limitation.", "maxLength": 500, "minLength": 1, "pattern": "^[^\\x00-\\x09\\x0b-\\x1f\\x7f-\\x9f\\u200b-\\u200f\\u202a-\\u202e\\u2060-\\u2064\\u2066-\\u2069\\ufeff]*$", "type": "string"}, "maxItems": 10, "title": "Limitations", "type": "array"}, "source_urls": {"description": "1 to 10 unique URLs, each one of the task's sources.", "items": {"description": "An https URL.", "maxLength": 500, "minLength": 1, "pattern": "^[^\\x00-\\x09\\x0b-\\x1f\\x7f-\\x9f\\u200b-\\u200f\\u202a-\\u202e\\u2060-\\u2064\\u2066-\\u2069\\ufeff]*$", "type": "string"}, "maxItems": 10, "minItems": 1, "title": "Source Urls", "type": "array", "uniqueItems": true}}, "required": ["schema", "verdict", "summary", "conditions", "attempts", "limitations", "source_urls"], "title": "ContributionPayload", "type": "object"}"""
SERVER_HIDDEN_CLASS = "\\x00-\\x09\\x0b-\\x1f\\x7f-\\x9f\\u200b-\\u200f\\u202a-\\u202e\\u2060-\\u2064\\u2066-\\u2069\\ufeff"
_HIDDEN = re.compile(f"[{SERVER_HIDDEN_CLASS}]")
# How the server's schemas say "no control or invisible character".
_VISIBLE_PATTERN = f"^[^{SERVER_HIDDEN_CLASS}]*$"


def _refused_unless(holds: Callable[[Any], bool], message: str) -> AfterValidator:
    """A check the server's models make that a JSON Schema cannot say, refused in their words."""

    def check(value: Any) -> Any:
        if not holds(value):
            raise ValueError(message)
        return value

    return AfterValidator(check)


_VISIBLE = _refused_unless(
    lambda text: not _HIDDEN.search(text),
    "holds a control or invisible character (only \\n is allowed)",
)
_UNIQUE = _refused_unless(lambda items: len(set(items)) == len(items), "items must be unique")
_INSTANT_FORM = "YYYY-MM-DDTHH:MM:SS.sssZ (UTC, such as 2026-05-01T12:00:00.000Z)"
# The schema's deadline pattern admits only real instants; the server tells a text in another form
# from one in the form that names no real instant (February 30), and so does the preview.
_INSTANT_SHAPE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z")
_ROOM = "max_contributors must be at least min_independent"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


def _checked_type(schema: dict[str, Any]) -> Any:
    """The type that checks one JSON Schema node as the server's models do, in their words."""
    if "const" in schema:
        return Literal[schema["const"]]
    if "enum" in schema:
        return Literal[tuple(schema["enum"])]
    kind = schema["type"]
    if kind == "object":
        return _checking_model(schema)
    if kind == "array":
        checks = [_UNIQUE] if schema.get("uniqueItems") else []
        limits = Field(min_length=schema.get("minItems"), max_length=schema.get("maxItems"))
        return Annotated[list[_checked_type(schema["items"])], limits, *checks]
    if kind == "integer":
        return Annotated[int, Field(ge=schema.get("minimum"), le=schema.get("maximum"))]
    if kind == "boolean":
        return bool
    pattern = schema.get("pattern")
    checks = [_VISIBLE] if pattern == _VISIBLE_PATTERN else []
    limits = Field(
        min_length=schema.get("minLength"),
        max_length=schema.get("maxLength"),
        pattern=None if checks else pattern,
    )
    return Annotated[str, limits, *checks]


def _checking_model(schema: dict[str, Any]) -> type[BaseModel]:
    """A strict model of an object schema whose `$defs` are written in place."""
    fields: dict[str, Any] = {}
    for name, node in schema["properties"].items():
        checked = _checked_type(node)
        default = ... if name in schema.get("required", ()) else node.get("default")
        # A field named as a model's own attribute (a report's `schema`) keeps its name as an alias.
        attribute = f"{name}_" if hasattr(BaseModel, name) else name
        fields[attribute] = (checked, Field(default, alias=name))
    return create_model(schema.get("title", "Checked"), __base__=_Strict, **fields)


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """A model's JSON Schema with its `$defs` written in place, to sit inside another schema."""
    definitions = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return resolve(dict(definitions[node["$ref"].rsplit("/", 1)[-1]]))
            return {key: resolve(item) for key, item in node.items()}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    return resolve(schema)


REQUEST_SCHEMA = _inline_refs(json.loads(SERVER_REQUEST_SCHEMA))
REPORT_SCHEMA: dict[str, Any] = {
    **_inline_refs(json.loads(SERVER_REPORT_SCHEMA)),
    "description": (
        f'The report exactly as it will be published, without "approval": schema "{CONTRIBUTION_SCHEMA}", '
        "verdict (source_supported | source_contradicted | source_unclear), summary (20..2000 chars), "
        "conditions (0..10), attempts (1..10), limitations (0..10) — items of 1..500 chars — and "
        "source_urls (1..10, each one of the task's sources)."
    ),
}
_REQUEST_MODEL = _checking_model(REQUEST_SCHEMA)


def _path(location: tuple[str | int, ...], prefix: str = "") -> str:
    """A pydantic error's location as the server writes it, such as `request.sources[1]`."""
    steps = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in location)
    return prefix + steps if prefix else steps.removeprefix(".")


def _issues(error: ValidationError, code: str, prefix: str = "") -> list[dict[str, str]]:
    issues = []
    for problem in error.errors():
        if problem["type"] == "extra_forbidden":
            message = "unknown field"
        elif problem["type"] == "missing":
            message = "required field is missing"
        elif (
            problem["type"] == "string_pattern_mismatch"
            and problem["ctx"]["pattern"] == (REQUEST_SCHEMA["properties"]["deadline"]["pattern"])
        ):
            real = "" if _INSTANT_SHAPE.fullmatch(problem["input"]) is None else "a real instant "
            message = f"must be {real}written as {_INSTANT_FORM}"
        else:
            message = problem["msg"].removeprefix("Value error, ")
        issues.append({"path": _path(problem["loc"], prefix), "code": code, "message": message})
    return issues


def request_issues(request: dict[str, Any]) -> list[dict[str, str]]:
    """The problems the server would find in the request's shape. Room for the contributions is
    checked last, as the server checks it: only once every field is right."""
    try:
        checked = _REQUEST_MODEL.model_validate(request).model_dump()
    except ValidationError as exc:
        return _issues(exc, "invalid_payload", "request")
    if checked["max_contributors"] < checked["min_independent"]:
        return [{"path": "request", "code": "invalid_payload", "message": _ROOM}]
    return []


_REPORT_MODEL = _checking_model(REPORT_SCHEMA)
# What a report refused here is told, by the code of the first rule it breaks.
LOCAL_REFUSALS = {
    "unknown_schema": f"this server takes schema {CONTRIBUTION_SCHEMA!r}",
    "invalid_payload": "the payload does not have the required shape",
    "task_closed": "the task takes no more contributions",
    "source_not_in_task": "every source URL must be one of the task's sources",
    "private_content": "the report holds what looks private; nothing was sent",
}


def report_issues(report: dict[str, Any], view: dict[str, Any]) -> tuple[str, list[dict[str, str]]]:
    """The first of the site's rules the report breaks, in the site's order (shape, the task
    still open, sources in the task, the privacy screen), with every issue of that rule; ("",
    []) when it breaks none. A sealed report gets these checks here only, before the deadline."""
    if "schema" in report and report["schema"] != CONTRIBUTION_SCHEMA:
        issue = {
            "path": "schema",
            "code": "unknown_schema",
            "message": f"expected {CONTRIBUTION_SCHEMA!r}",
        }
        return "unknown_schema", [issue]
    try:
        _REPORT_MODEL.model_validate(report)
    except ValidationError as exc:
        return "invalid_payload", _issues(exc, "invalid_payload")
    if view.get("state") != "open":
        return "task_closed", [
            {"path": "", "code": "task_closed", "message": LOCAL_REFUSALS["task_closed"]}
        ]
    sources = view.get("sources") or []
    issues = [issue.as_dict() for issue in source_in_task_issues(report["source_urls"], sources)]
    if issues:
        return "source_not_in_task", issues
    issues = [issue.as_dict() for issue in screen(report_texts(report))]
    return ("private_content", issues) if issues else ("", [])


# ---------------------------------------------------------------------------------------------
# Key-like values: a participant card is public, so it must never carry a secret.
# ---------------------------------------------------------------------------------------------

_BASE58 = "1-9A-HJ-NP-Za-km-z"
# Words that are common in prose and absent from the BIP39 word list: a seed phrase never holds one.
_PROSE_WORDS = frozenset(
    ("the", "and", "for", "with", "from", "than", "are", "was", "were", "has", "had", "its", "our",
     "your", "their", "them", "these", "those", "not", "but", "which", "been", "does", "did", "how",
     "why", "who", "would", "should", "could", "may", "might", "shall", "each", "every", "some",
     "most", "after", "while", "being", "here")
)  # fmt: skip
_WORD_RUN = re.compile(r"(?<![A-Za-z0-9_-])[a-z]{3,8}(?:\s+[a-z]{3,8}){11,}(?![A-Za-z0-9_-])")
_KEY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a PEM private key", re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")),
    ("a hex private key", re.compile(r"(?<![0-9A-Za-z])(?:0x)?[0-9a-fA-F]{64}(?![0-9A-Za-z])")),
    ("an extended private key", re.compile(rf"\b[xyzt]prv[{_BASE58}]{{100,}}")),
    (
        "a WIF private key",
        re.compile(rf"(?<![{_BASE58}])[5KLc][{_BASE58}]{{50,51}}(?![{_BASE58}])"),
    ),
    ("a base58 secret key", re.compile(rf"(?<![{_BASE58}])[{_BASE58}]{{80,}}(?![{_BASE58}])")),
    ("a Cairn token", re.compile(r"\bcairn_[A-Za-z0-9_-]{20,}")),
    (
        "a GitHub token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
    ),
    (
        "an API key",
        re.compile(
            r"\b(?:sk-[A-Za-z0-9_-]{16,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,})"
        ),
    ),
    ("a JSON Web Token", re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.")),
    ("a bearer token", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{16,}")),
)


def key_like(text: str) -> str | None:
    """What secret a text looks like it holds, or None. A heuristic: it refuses what looks like a
    private key, a seed phrase or a token; it cannot prove a text holds none."""
    for kind, pattern in _KEY_PATTERNS:
        if pattern.search(text):
            return kind
    for run in _WORD_RUN.finditer(text):
        if not _PROSE_WORDS.intersection(run.group().split()):
            return "a seed phrase"
    return None


def key_like_issues(value: Any, path: str = "") -> list[dict[str, str]]:
    issues: list[dict[str, str]] = []
    if isinstance(value, str):
        kind = key_like(value)
        if kind:
            issues.append(
                {"path": path, "code": "private_content", "message": f"looks like {kind}"}
            )
    elif isinstance(value, dict):
        for key, item in value.items():
            issues += key_like_issues(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            issues += key_like_issues(item, f"{path}[{index}]")
    return issues


# ---------------------------------------------------------------------------------------------
# CAIRN_HOME: the token, the consent record and the participant card.
# ---------------------------------------------------------------------------------------------


class _InHome:
    """A file or folder of CAIRN_HOME, read as an attribute of the `Config` that says where it is."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, config: Config, owner: type[Config]) -> Path:
        return config.home / self.name


@dataclass(frozen=True)
class Config:
    cairn_url: str
    home: Path
    home_chosen: bool  # CAIRN_HOME was set by the user

    @classmethod
    def from_environment(cls) -> Config:
        home = os.environ.get("CAIRN_HOME", "").strip()
        url = os.environ.get("CAIRN_URL", "").strip() or DEFAULT_CAIRN_URL
        return cls(
            cairn_url=url.rstrip("/"),
            home=Path(home or "~/.cairn").expanduser(),
            home_chosen=bool(home),
        )

    token_file = _InHome("token")
    consent_file = _InHome("consent.json")
    card_file = _InHome("card.json")
    receipts_dir = _InHome("receipts")


def _now() -> str:
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def _make_home(config: Config) -> None:
    config.home.mkdir(mode=0o700, parents=True, exist_ok=True)


def _write_new(path: Path, text: str, mode: int) -> bool:
    """Create a file that must not exist yet; False when it already does (nothing is overwritten)."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        return False
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(text)
    os.chmod(path, mode)  # the umask may have narrowed it, never widened it
    return True


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        raise ToolRefusal(
            "invalid_home", f"{path} cannot be read as JSON; fix or remove it"
        ) from None


def read_token(config: Config) -> str | None:
    try:
        token = config.token_file.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return token or None


def read_consent(config: Config) -> dict[str, Any] | None:
    consent = _read_json(config.consent_file)
    return consent if isinstance(consent, dict) else None


def require_consent(config: Config) -> None:
    consent = read_consent(config)
    if not consent or consent.get("public_output") is not True:
        raise ToolRefusal(
            "consent_required",
            "no write without recorded consent: ask the person, then call cairn_local_set_consent "
            "with public_output true",
        )


def require_digest(kind: str, value: Any, given: str) -> str:
    """The digest of what is about to be sent, which must be the one the person approved."""
    digest = canonical_digest(value)
    if given != digest:
        raise ToolRefusal(
            "preview_changed",
            f"this {kind} is not the one whose digest the person approved: nothing was sent; "
            "preview it again and ask them",
            [{"path": "", "code": "preview_changed", "message": "the digest does not match"}],
        )
    return digest


def save_receipt(config: Config, receipt: dict[str, Any]) -> None:
    """Keep a signed receipt: with `cairn_verify.py receipt <file>` it proves the contribution was
    sealed, and proves its omission if the log or the evaluation ever leaves it out."""
    name = str(receipt.get("contribution_id", ""))
    if not re.fullmatch(r"[0-9a-f-]{36}", name):
        return
    _make_home(config)
    config.receipts_dir.mkdir(mode=0o700, exist_ok=True)
    _write_new(config.receipts_dir / f"{name}.json", json.dumps(receipt, indent=2) + "\n", 0o600)


def save_card(config: Config, card: dict[str, Any]) -> bool:
    _make_home(config)
    return _write_new(
        config.card_file, json.dumps(card, ensure_ascii=False, indent=2) + "\n", 0o600
    )


# ---------------------------------------------------------------------------------------------
# Talking to Cairn: the A2A client for tasks, plain HTTP for registration and `mine`.
# ---------------------------------------------------------------------------------------------


def _http(token: str | None = None) -> httpx.AsyncClient:
    headers = {"User-Agent": CLIENT}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.AsyncClient(headers=headers, timeout=TIMEOUT_S)


def _http_refusal(response: httpx.Response) -> ToolRefusal:
    try:
        body = response.json()
    except ValueError:
        body = None
    return ToolRefusal.from_body(
        body, f"{response.request.url} answered HTTP {response.status_code}"
    )


def _unreachable(config: Config, exc: Exception) -> ToolRefusal:
    return ToolRefusal("server_unreachable", f"cannot reach Cairn at {config.cairn_url}: {exc}")


async def ensure_token(config: Config) -> str:
    """The agent token, registered on the first write and kept in CAIRN_HOME/token (mode 0600)."""
    token = read_token(config)
    if token:
        return token
    try:
        async with _http() as http:
            response = await http.post(
                f"{config.cairn_url}/api/agent/register", json={"label": CLIENT}
            )
    except httpx.HTTPError as exc:
        raise _unreachable(config, exc) from None
    if response.status_code != 201:
        raise _http_refusal(response)
    token = response.json()["token"]
    _make_home(config)
    if not _write_new(config.token_file, token + "\n", 0o600):
        return read_token(config) or token  # another write registered first: use its token
    return token


def a2a_refusal(config: Config, exc: Exception) -> ToolRefusal:
    """A2A's errors as Cairn's codes: -32001 not_found, -32004 task_closed, -32602 invalid_query."""
    if isinstance(exc, TaskNotFoundError):
        return ToolRefusal("not_found", exc.message or "no task has this id")
    if isinstance(exc, UnsupportedOperationError):
        return ToolRefusal("task_closed", exc.message or "the task takes no more contributions")
    if isinstance(exc, InvalidParamsError):
        return ToolRefusal("invalid_query", exc.message or "invalid params")
    cause = exc.__cause__
    if isinstance(cause, httpx.HTTPStatusError) and cause.response.status_code == 401:
        return ToolRefusal(
            "unauthorized",
            f"Cairn refused the token in {config.token_file} (revoked?); remove the file to register anew",
        )
    if isinstance(exc, A2AClientError):
        return _unreachable(config, exc)
    return ToolRefusal("server_error", str(exc) or type(exc).__name__)


@contextlib.asynccontextmanager
async def a2a(config: Config, token: str | None = None):
    """An A2A client for the server's card (resolved with the SDK); a token only for writes."""
    async with _http(token) as http:
        try:
            client = await ClientFactory(
                ClientConfig(httpx_client=http, streaming=False)
            ).create_from_url(config.cairn_url)
        except A2AError as exc:
            raise _unreachable(config, exc) from None
        except httpx.HTTPError as exc:
            raise _unreachable(config, exc) from None
        try:
            async with client:
                yield client
        except A2AError as exc:
            raise a2a_refusal(config, exc) from None
        except httpx.HTTPError as exc:
            raise _unreachable(config, exc) from None


VIEW_FIELDS = (
    "id", "title", "question", "sources", "acceptance_criteria", "deadline", "min_independent",
    "max_contributors", "budget", "public_input_digest", "created_at", "state", "contributions_received",
    "outcome", "verdict", "evaluated_at",
)  # fmt: skip


def view_of(task: Task) -> dict[str, Any]:
    """The public view (SPEC §3.2) from an A2A Task: `metadata.cairn` plus the evaluation artifact."""
    data = ints_from_doubles(MessageToDict(task))
    public = data.get("metadata", {}).get("cairn", {})
    view = {name: public.get(name) for name in VIEW_FIELDS}
    view["evaluation"] = None
    for artifact in data.get("artifacts", []):
        if artifact.get("artifactId") == "evaluation" and artifact.get("parts"):
            view["evaluation"] = artifact["parts"][0].get("data")
    return view


async def send(
    config: Config, payload: dict[str, Any], *, operation: str, task_id: str = ""
) -> Task:
    """SendMessage with the agent's token; a refusal Message becomes its `{"error": ...}` body.

    The message id is derived from what was approved, so a retry after a lost answer is the same
    operation (Cairn replays it) rather than a second write.
    """
    token = await ensure_token(config)
    message = Message(
        message_id=str(
            uuid.uuid5(
                uuid.NAMESPACE_URL, f"cairn_mcp:{operation}:{task_id}:{canonical_digest(payload)}"
            )
        ),
        role=Role.ROLE_USER,
        parts=[Part(data=ParseDict(payload, struct_pb2.Value()))],
        metadata={"cairn": {"client": CLIENT}},
    )
    if task_id:
        message.task_id = task_id
    events = []
    async with a2a(config, token) as client:
        async for event in client.send_message(SendMessageRequest(message=message)):
            events.append(event)  # one: Cairn does not stream
    kind = events[0].WhichOneof("payload") if events else None
    if kind == "task":
        return events[0].task
    if kind == "message":
        parts = [
            ints_from_doubles(MessageToDict(part.data))
            for part in events[0].message.parts
            if part.HasField("data")
        ]
        raise ToolRefusal.from_body(parts[0] if parts else None, "Cairn refused the message")
    raise ToolRefusal(
        "server_error", "Cairn answered SendMessage with neither a task nor a message"
    )


# ---------------------------------------------------------------------------------------------
# Whom to trust for the log, and the check before sealing: the task's entry and deadline under a
# checkpoint a quorum of witnesses cosigned, as cairn_verify.py checks it (ledger/signed_note.py),
# with its pins (CAIRN_HOME/verify/<host>/: the site keys, the witnesses, the keypers and their
# threshold; ledger/pins.py), so both trust the same parties: pinned on first use, or from
# `cairn_verify.py --witnesses FILE`.
# ---------------------------------------------------------------------------------------------

VERIFIABLE_EXTENSION = "urn:cairn:verifiable:v1"
CONTRIBUTION_ENTRY = "cairn.log/contribution"
FIRST_LOG_PATH = "/api/log"


def _untrusted(message: str) -> ToolRefusal:
    return ToolRefusal("log_unverified", f"nothing was sent: {message}")


@dataclass(frozen=True)
class Trust:
    """What the pins say: the site keys, the witnesses (with their URLs) and quorum, and the
    keypers and threshold; `sealing` whether the site's card lists keypers now."""

    site_keys: list[bytes]
    witnesses: list[VerifierKey]
    quorum: int
    witness_urls: dict[str, str]
    keypers: list[Keyper]
    threshold: int
    sealing: bool

    def witness_named(self, name: str) -> VerifierKey | None:
        return next((w for w in self.witnesses if w.name == name), None)


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes
    cosigned: int  # by distinct pinned witnesses


def checkpoint_verified(text: str, trust: Trust) -> Checkpoint:
    """A checkpoint signed by a pinned site key, with the pinned witnesses' cosignatures that
    verify counted; a pinned key's signature that does not verify is refused."""
    try:
        checked = checkpoint_checked(text, trust.site_keys, trust.witnesses)
    except NoteError as error:
        raise _untrusted(str(error)) from None
    body = checked.body
    return Checkpoint(body.origin, body.tree_size, body.root, len(checked.cosigned))


async def _get_json(http: httpx.AsyncClient, url: str) -> Any:
    response = await http.get(url)
    if response.status_code != 200:
        raise _untrusted(f"{url} answered HTTP {response.status_code}")
    return response.json()


async def card_params(url: str, http: httpx.AsyncClient) -> dict[str, Any]:
    card = await _get_json(http, f"{url}/.well-known/agent-card.json")
    for extension in card.get("capabilities", {}).get("extensions", []):
        if extension.get("uri") == VERIFIABLE_EXTENSION:
            return extension.get("params", {})
    return {}


async def trust_pinned(config: Config, http: httpx.AsyncClient) -> Trust:
    """The pins cairn_verify.py keeps for this site, made from the site's JWKS and card when
    there are none. Keypers are pinned the first time the card lists any; a card that later
    lists others, or another threshold, is refused: sealing to them would trust parties nobody
    pinned."""
    home = config.home / "verify" / urllib.parse.urlsplit(config.cairn_url).netloc.replace(":", "_")
    card = card_trust(await card_params(config.cairn_url, http))
    jwks_file, pins_file = home / "jwks.json", home / "witnesses.json"
    jwks = _read_json(jwks_file)
    if jwks is None:
        jwks = await _get_json(http, f"{config.cairn_url}/.well-known/jwks.json")
        _pin(jwks_file, jwks)
    stored = _read_json(pins_file) or dict(card)
    before = dict(stored) if pins_file.exists() else None
    pinned, _ = pins_completed(stored, card)
    if pinned != before:
        _pin(pins_file, pinned)
    if keypers_differ(pinned, card):
        raise ToolRefusal(
            "keypers_changed",
            f"the site's card lists other keypers or another threshold than pinned in {pins_file}: "
            "nothing was sent. If the site's operator confirms the change, remove that file to "
            "pin the card's, or send the plain form (plain: true)",
        )
    try:
        witnesses = [witness_key(key) for key in pinned["keys"]]
    except NoteError as error:
        raise _untrusted(str(error)) from None
    return Trust(
        site_keys=site_keys(jwks),
        witnesses=witnesses,
        quorum=int(pinned["quorum"]),
        witness_urls=pinned["urls"],
        keypers=[Keyper(**keyper) for keyper in pinned["keypers"]],
        threshold=int(pinned["keyper_threshold"]),
        sealing=bool(card["keypers"]),
    )


async def site_logs(url: str, http: httpx.AsyncClient, origin: str) -> list[LogListed]:
    """The site's logs, oldest first, as its card lists them (§16.2); a card listing none is of
    a site that never restarted its one log, whose origin is `origin` (empty when the caller
    does not know it yet)."""
    try:
        listed = logs_listed(await card_params(url, http))
    except ValueError as error:
        raise _untrusted(str(error)) from None
    return listed or [LogListed(origin, FIRST_LOG_PATH)]


async def _entry_log(
    http: httpx.AsyncClient, url: str, logs: list[LogListed], entry: dict[str, Any]
) -> tuple[LogListed, int] | None:
    """The log holding `entry` of task `entry["task_id"]`, and its index there."""
    listings = [
        (await _get_json(http, f"{url}{log.path}/tasks/{entry['task_id']}"))["entries"]
        for log in logs
    ]
    found = entry_log(entry, listings)
    return None if found is None else (logs[found[0]], found[1])


def _pin(path: Path, value: Any) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2), encoding="utf-8")


async def task_entry_witnessed(
    config: Config, http: httpx.AsyncClient, view: dict[str, Any], trust: Trust
) -> tuple[Checkpoint, int]:
    """The checkpoint carrying the pinned witness quorum under which the task's entry, with its
    deadline, is proven in the log that holds it, and the entry's index there: the keypers will
    find them in the trees they cosigned, and release the shares for that task and deadline
    only."""
    entry = task_entry(view)
    logs = await site_logs(config.cairn_url, http, "")
    found = await _entry_log(http, config.cairn_url, logs, entry)
    if found is None:
        raise _untrusted(
            "the task's entry is not yet in the log with its deadline: try again in a minute"
        )
    log, index = found
    base = f"{config.cairn_url}{log.path}"
    response = await http.get(f"{base}/checkpoints", params={"covering": index})
    if response.status_code == 404 and trust.quorum == 0:
        response = await http.get(f"{base}/checkpoint")
        notes = [response.text]
    elif response.status_code == 404:
        raise _untrusted(
            "no witnessed checkpoint holds the task's entry yet: try again in a minute"
        )
    else:
        notes = response.json()["checkpoints"] if response.status_code == 200 else []
    if response.status_code != 200 or not notes:
        raise _untrusted(f"{response.request.url} answered HTTP {response.status_code}")
    checkpoint = checkpoint_verified(notes[-1], trust)
    if log.origin and checkpoint.origin != log.origin:
        raise _untrusted(f"{base} serves checkpoints of {checkpoint.origin}, not {log.origin}")
    if checkpoint.cosigned < trust.quorum:
        raise _untrusted(
            f"the checkpoint served as witnessed carries {checkpoint.cosigned} of the "
            f"{trust.quorum} cosignatures the pinned witnesses must give"
        )
    leaf = leaf_hash(canonical_json(entry))
    proof = await _get_json(
        http,
        f"{base}/proof/inclusion?leaf_hash={leaf.hex()}&tree_size={checkpoint.size}",
    )
    path = [bytes.fromhex(h) for h in proof["hashes"]]
    if not inclusion_verify(proof["index"], checkpoint.size, leaf, path, checkpoint.root):
        raise _untrusted("the task's entry is not proven under the witnessed checkpoint")
    return checkpoint, int(proof["index"])


# ---------------------------------------------------------------------------------------------
# Keyper-sealed contributions (SPEC §15.8): sealed here, so the site never holds the report in
# clear before the deadline; each kept in CAIRN_HOME/sealed/<contribution_id>.json (mode 0600)
# with its report and salt, which `cairn_verify.py dispute` needs; and their releases asked for
# once the deadline + 60 s has passed.
# ---------------------------------------------------------------------------------------------

RELEASE_TIMEOUT_S = 5.0
# The longest the start-up asks for releases run, beside the tools and never before them.
RELEASES_AT_START_S = 30.0


def _sealed_file(config: Config, name: str) -> Path:
    return config.home / "sealed" / f"{name}.json"


def keep_private(config: Config, path: Path, value: Any) -> None:
    """Write a file of CAIRN_HOME that only its owner reads (mode 0600), replacing any before it
    whole."""
    _make_home(config)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(json.dumps(value, ensure_ascii=False, indent=2) + "\n")
    os.chmod(temporary, 0o600)
    os.replace(temporary, path)


async def sealed_for(
    config: Config, view: dict[str, Any], report: dict[str, Any], trust: Trust
) -> tuple[dict[str, Any], Path]:
    """The sealed payload of `report` for the task, with what is kept of it; and the file that
    holds it until the site's receipt names the contribution. A retry after a lost answer sends
    the same payload again, which the site answers from its record."""
    pending = _sealed_file(config, f"pending-{view['id']}")
    kept = _read_json(pending)
    if (
        isinstance(kept, dict)
        and kept.get("cairn_url") == config.cairn_url
        and kept.get("report") == report
    ):
        return kept, pending
    witnesses = {}
    for keyper in trust.keypers:
        witness, url = trust.witness_named(keyper.name), trust.witness_urls.get(keyper.name)
        if witness is None or url is None:
            raise _untrusted(f"keyper {keyper.name} is not a pinned witness: nothing verifies it")
        witnesses[keyper.name] = (witness.text, url)
    async with _http() as http:
        checkpoint, index = await task_entry_witnessed(config, http, view, trust)
    kept = {
        **sealed_kept(
            report,
            cairn_url=config.cairn_url,
            site=checkpoint.origin,
            view=view,
            task_entry=index,
            keypers=trust.keypers,
            threshold=trust.threshold,
        ),
        "task_entry": {"index": index, "entry": task_entry(view)},
        "keypers": [
            {
                "name": keyper.name,
                "url": keyper.url,
                "witness_key": witnesses[keyper.name][0],
                "witness_url": witnesses[keyper.name][1],
            }
            for keyper in trust.keypers
        ],
        "threshold": trust.threshold,
        "releases": [],
    }
    keep_private(config, pending, kept)
    return kept, pending


async def releases_ask(config: Config) -> None:
    """Ask the keypers for the releases of this contributor's own sealed contributions past
    their deadline + 60 s that some keyper has not released yet (§15.8). Anyone may ask; a
    keyper keeps the time of its first release, so a release asked early disproves a keeper's
    later claim that the keys were unavailable. Best effort, bounded, beside the tools."""
    directory = config.home / "sealed"
    if not directory.is_dir():
        return
    with anyio.move_on_after(RELEASES_AT_START_S):
        async with httpx.AsyncClient(
            headers={"User-Agent": CLIENT}, timeout=RELEASE_TIMEOUT_S
        ) as http:
            for path in sorted(directory.glob("*.json")):
                if path.name.startswith("pending-"):
                    continue
                try:
                    await _releases_ask_one(config, http, path)
                except (httpx.HTTPError, ToolRefusal, OSError, ValueError, KeyError) as exc:
                    logger.warning("asking the releases of %s: %s", path.name, exc)


async def _releases_ask_one(config: Config, http: httpx.AsyncClient, path: Path) -> None:
    kept = json.loads(path.read_text(encoding="utf-8"))
    not_before = datetime.strptime(kept["deadline"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    if datetime.now(UTC) < not_before + MAX_MERGE_DELAY:
        return
    released = {release["keyper"] for release in kept["releases"]}
    receipt = kept["receipt"]
    contribution_entry = {
        "type": CONTRIBUTION_ENTRY,
        "task_id": kept["task_id"],
        "contribution_id": kept["contribution_id"],
        "commitment": receipt["commitment"],
        "received_at": receipt["received_at"],
    }
    logs = await site_logs(kept["cairn_url"], http, kept["site"])
    task_log = await _entry_log(http, kept["cairn_url"], logs, kept["task_entry"]["entry"])
    contribution_log = await _entry_log(http, kept["cairn_url"], logs, contribution_entry)
    if task_log is None or contribution_log is None or task_log[0].origin != kept["site"]:
        logger.info("the site serves the entries of %s in none of its logs", path.name)
        return
    entries = {"task_entry": kept["task_entry"]["entry"], "contribution_entry": contribution_entry}
    added = []
    for share, keyper in zip(kept["sealed"]["shares"], kept["keypers"], strict=True):
        if keyper["name"] in released:
            continue
        try:
            release = await _release_ask(
                http, kept, share, keyper, entries, (task_log, contribution_log)
            )
        except (httpx.HTTPError, ToolRefusal, ValueError, KeyError) as exc:
            logger.info("keyper %s gave no release of %s: %s", keyper["name"], path.name, exc)
            continue
        if release is not None:
            added.append(release)
    if added:
        keep_private(config, path, {**kept, "releases": [*kept["releases"], *added]})


def _cosigned_size(text: str, origin: str, witness: VerifierKey) -> int | None:
    """The size of checkpoint `text` of log `origin` when `witness` cosigned it, else None."""
    try:
        note = note_parse(text)
        body = checkpoint_body_parse(note.body)
        signature = note.signed_by(witness)
        if body.origin != origin or signature is None:
            return None
        cosignature_verify(note.body, signature, witness)
    except NoteError:
        return None
    return body.tree_size


async def _keyper_size(
    http: httpx.AsyncClient, url: str, keyper: dict[str, str], at: tuple[LogListed, int]
) -> int | None:
    """The tree of the log a release's proofs must lead to, for the entry `at` its index there:
    the latest witnessed checkpoint of it holding the entry that the keyper cosigned, else the
    latest the keyper cosigned, which for a log the site restarted may be a tree the site lost
    and can no longer prove against (§16.2)."""
    log, index = at
    response = await http.get(f"{url}{log.path}/checkpoints", params={"covering": index})
    notes = response.json()["checkpoints"] if response.status_code == 200 else []
    witness = witness_key(keyper["witness_key"])
    for note in reversed(notes):
        size = _cosigned_size(note, log.origin, witness)
        if size is not None:
            return size
    cosigned = KeyperCheckpoint(keyper["witness_url"], log.origin)
    response = await http.get(cosigned.url)
    return cosigned.size(response.text) if response.status_code == 200 else None


async def _entry_proven(
    http: httpx.AsyncClient, url: str, log: LogListed, entry: dict[str, Any], size: int
) -> EntryProven:
    text = canonical_json(entry)
    proof = await _get_json(
        http,
        f"{url}{log.path}/proof/inclusion?leaf_hash={leaf_hash(text).hex()}&tree_size={size}",
    )
    return EntryProven(log.origin, size, int(proof["index"]), text.decode(), proof["hashes"])


async def _release_ask(
    http: httpx.AsyncClient,
    kept: dict[str, Any],
    share: dict[str, Any],
    keyper: dict[str, str],
    entries: dict[str, dict[str, Any]],
    logs: tuple[tuple[LogListed, int], tuple[LogListed, int]],
) -> dict[str, Any] | None:
    """One keyper's release, asked with each entry proven in the log that holds it (`logs`: the
    task's entry's log and index there, then the contribution's), against a tree of that log the
    keyper cosigned; None when it gives none that its witness key verifies."""
    origin = kept["site"]
    task_at, contribution_at = logs
    task_log, contribution_log = task_at[0], contribution_at[0]
    url = kept["cairn_url"]
    size = await _keyper_size(http, url, keyper, contribution_at)
    later = size
    if contribution_log != task_log:
        size = await _keyper_size(http, url, keyper, task_at)
    if size is None or later is None:
        return None
    body = release_request(
        share,
        task_id=kept["task_id"],
        contribution_id=kept["contribution_id"],
        threshold=kept["threshold"],
        ciphertext_digest=ciphertext_digest(b64u_decode(kept["sealed"]["ciphertext"])),
        task_entry=await _entry_proven(http, url, task_log, entries["task_entry"], size),
        contribution_entry=await _entry_proven(
            http, url, contribution_log, entries["contribution_entry"], later
        ),
    )
    response = await http.post(f"{keyper['url'].rstrip('/')}/release", json=body)
    if response.status_code != 200:
        return None
    answer = response.json()
    release = {
        "keyper": keyper["name"],
        "index": share["index"],
        "share": answer.get("share"),
        "released_at": answer.get("released_at"),
        "signature": answer.get("signature"),
    }
    claims = release_claims(
        keyper=keyper["name"],
        site=origin,
        task_id=kept["task_id"],
        contribution_id=kept["contribution_id"],
        index=share["index"],
        share=str(release["share"]),
        released_at=str(release["released_at"]),
    )
    public = Ed25519PublicKey.from_public_bytes(witness_key(keyper["witness_key"]).public)
    if answer.get("keyper") != keyper["name"] or not release_verify(
        claims, str(release["signature"]), public
    ):
        return None
    return release


# ---------------------------------------------------------------------------------------------
# The tools (SPEC §10).
# ---------------------------------------------------------------------------------------------

RequestObject = Annotated[dict[str, Any], WithJsonSchema(REQUEST_SCHEMA)]
ReportObject = Annotated[dict[str, Any], WithJsonSchema(REPORT_SCHEMA)]
Digest = Annotated[str, Field(max_length=100, description='"sha256:" + 64 lowercase hex digits.')]


class Arguments(_Strict):
    """Tool arguments: strict, no unknown names (bad arguments are `invalid_query`)."""


class NoArguments(Arguments):
    pass


# The two read tools the hosted server offers too, as it describes them with the schemas of their
# arguments, and the A2A state each `status` of cairn_a2a_tasks lists: the site serving this file
# writes them here.
SERVER_READ_TOOLS = r"""{"cairn_a2a_tasks": {"description": "List Cairn's source-review tasks, newest status first: open ones (taking sealed contributions until their deadline), completed ones (resolved or contested) or failed ones (too few contributions). Answers {tasks: [view], next_page_token}; next_page_token is \"\" on the last page.", "input_schema": {"additionalProperties": false, "properties": {"status": {"default": "open", "description": "\"open\" (taking contributions), \"completed\" (resolved or contested) or \"failed\" (unresolved).", "enum": ["open", "completed", "failed"], "title": "Status", "type": "string"}, "page_size": {"default": 20, "description": "Tasks per page, 1 to 50.", "maximum": 50, "minimum": 1, "title": "Page Size", "type": "integer"}, "page_token": {"default": "", "description": "The next_page_token of the previous page; \"\" (or absent) for the first page.", "maxLength": 1000, "title": "Page Token", "type": "string"}}, "title": "TasksArguments", "type": "object"}}, "cairn_a2a_task": {"description": "Read one task's public view. Once evaluated, `evaluation` holds the outcome and every contribution with its report digest, which anyone can recompute (RFC 8785 + SHA-256).", "input_schema": {"additionalProperties": false, "properties": {"task_id": {"description": "The task's id (a UUID).", "maxLength": 200, "minLength": 1, "title": "Task Id", "type": "string"}}, "required": ["task_id"], "title": "TaskArguments", "type": "object"}}}"""
SERVER_TASK_STATES = r"""{"open": "TASK_STATE_WORKING", "completed": "TASK_STATE_COMPLETED", "failed": "TASK_STATE_FAILED"}"""

READ_TOOLS: dict[str, dict[str, Any]] = json.loads(SERVER_READ_TOOLS)
TASK_STATES: dict[str, str] = json.loads(SERVER_TASK_STATES)


class PreviewTaskArguments(Arguments):
    request: RequestObject = Field(
        description="The public request: the eight fields of cairn.open_task/0.1."
    )


class CreateTaskArguments(Arguments):
    request: RequestObject = Field(description="The request exactly as previewed and approved.")
    public_input_digest: Digest = Field(
        description="The digest from cairn_a2a_preview_task that the person approved."
    )


class ContributeArguments(Arguments):
    task_id: str = Field(min_length=1, max_length=200, description="The task's id.")
    report: ReportObject
    public_output_digest: Digest | None = Field(
        None,
        description="Leave out to preview (nothing is sent); give the previewed digest once the person approved it.",
    )
    plain: bool = Field(
        False,
        description="Send the plain form, which the site reads at once (and keeps encrypted at rest), "
        "instead of sealing the report to the site's keypers, which open it only after the deadline. "
        "Changes nothing when the site lists no keypers.",
    )


class CardArguments(Arguments):
    name: str = Field(min_length=1, max_length=100, description="The participant's public name.")
    description: str = Field(
        min_length=1, max_length=2000, description="What the participant does, publicly."
    )
    skills: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        default_factory=list,
        max_length=20,
        description="What it is good at, one short phrase each.",
    )
    wallet: str | None = Field(
        None,
        min_length=1,
        max_length=128,
        description="A public wallet address (never a key or seed).",
    )


class SaveCardArguments(Arguments):
    card: dict[str, Any] = Field(description="A participant card, as cairn_a2a_card builds it.")


class ConsentArguments(Arguments):
    public_output: bool = Field(
        description="True once the person agreed that what the agent posts or contributes is published; false withdraws it."
    )


async def tool_tasks(config: Config, args: BaseModel) -> dict[str, Any]:
    arguments = args.model_dump()
    request = ListTasksRequest(
        status=TASK_STATES[arguments["status"]],
        page_size=arguments["page_size"],
        page_token=arguments["page_token"],
        include_artifacts=True,
    )
    async with a2a(config) as client:
        page = await client.list_tasks(request)
    return {
        "tasks": [view_of(task) for task in page.tasks],
        "next_page_token": page.next_page_token,
    }


async def tool_task(config: Config, args: BaseModel) -> dict[str, Any]:
    async with a2a(config) as client:
        task = await client.get_task(GetTaskRequest(id=args.model_dump()["task_id"]))
    return view_of(task)


async def tool_preview_task(config: Config, args: PreviewTaskArguments) -> dict[str, Any]:
    issues = request_issues(args.request)
    try:
        digest: str | None = canonical_digest(args.request)
    except rfc8785.CanonicalizationError as exc:
        digest = None
        issues.append(
            {
                "path": "request",
                "code": "invalid_payload",
                "message": f"cannot be canonicalised: {exc}",
            }
        )
    return {"request": args.request, "public_input_digest": digest, "issues": issues}


async def tool_create_task(config: Config, args: CreateTaskArguments) -> dict[str, Any]:
    require_consent(config)
    digest = require_digest("request", args.request, args.public_input_digest)
    payload = {
        "schema": OPEN_TASK_SCHEMA,
        "request": args.request,
        "approval": {
            "public_input_digest": digest,
            "public_output": True,
            "scope": OPEN_TASK_SCOPE,
        },
    }
    task = await send(config, payload, operation="post")
    return {"task": view_of(task)}


async def tool_contribute(config: Config, args: ContributeArguments) -> dict[str, Any]:
    """Previews, or sends once approved, after the site's own checks run here: the report's
    shape, its sources against the task's, and the privacy screen. When the site lists keypers
    the report is sealed to them (unless `plain`), so the site cannot read it before the
    deadline, and those checks are the only ones it gets before then."""
    if "approval" in args.report:
        raise ToolRefusal(
            "invalid_query",
            "the report is sent without its approval: Cairn adds it from the digest you approve",
            [{"path": "report.approval", "code": "invalid_query", "message": "leave approval out"}],
        )
    if args.public_output_digest is not None:
        require_consent(config)
        require_digest("report", args.report, args.public_output_digest)
    async with a2a(config) as client:
        view = view_of(await client.get_task(GetTaskRequest(id=args.task_id)))
    async with _http() as http:
        trust = None if args.plain else await _trust_if_sealing(config, http)
    code, issues = report_issues(args.report, view)
    if args.public_output_digest is None:
        return {
            "report": args.report,
            "public_output_digest": canonical_digest(args.report),
            "form": "plain" if trust is None else "sealed",
            "issues": issues,
        }
    if code:
        raise ToolRefusal(code, LOCAL_REFUSALS[code], issues)
    if trust is None:
        payload = {
            **args.report,
            "approval": {
                "public_output_digest": args.public_output_digest,
                "public_output": True,
                "scope": CONTRIBUTION_SCOPE,
            },
        }
        task = await send(config, payload, operation="contribute", task_id=args.task_id)
        receipt = _receipt_of(task)
        if receipt is not None:
            save_receipt(config, receipt)
        return {"task": view_of(task), "receipt": receipt}
    kept, pending = await sealed_for(config, view, args.report, trust)
    try:
        task = await send(config, kept["sealed"], operation="contribute", task_id=args.task_id)
    except ToolRefusal as refusal:
        if refusal.code not in ("server_unreachable", "server_error"):
            pending.unlink(missing_ok=True)  # refused: nothing of it is kept by the site
        raise
    receipt = _receipt_of(task)
    if receipt is not None:
        save_receipt(config, receipt)
        if re.fullmatch(r"[0-9a-f-]{36}", str(receipt.get("contribution_id", ""))):
            kept = {**kept, "contribution_id": receipt["contribution_id"], "receipt": receipt}
            keep_private(config, _sealed_file(config, receipt["contribution_id"]), kept)
            pending.unlink(missing_ok=True)
    return {"task": view_of(task), "receipt": receipt}


def _receipt_of(task: Task) -> dict[str, Any] | None:
    receipt = ints_from_doubles(MessageToDict(task.metadata)).get("cairn", {}).get("contribution")
    return receipt if isinstance(receipt, dict) else None


async def _trust_if_sealing(config: Config, http: httpx.AsyncClient) -> Trust | None:
    """The pinned trust when the site's card lists keypers (a contribution is sealed to them),
    else None (the plain form)."""
    try:
        params = await card_params(config.cairn_url, http)
    except httpx.HTTPError as exc:
        raise _unreachable(config, exc) from None
    if not params.get("keypers"):
        return None
    try:
        return await trust_pinned(config, http)
    except httpx.HTTPError as exc:
        raise _unreachable(config, exc) from None


async def tool_mine(config: Config, args: NoArguments) -> dict[str, Any]:
    token = read_token(config)
    if not token:
        return {"tasks": [], "contributions": []}
    try:
        async with _http(token) as http:
            response = await http.get(f"{config.cairn_url}/api/a2a-tasks/mine")
    except httpx.HTTPError as exc:
        raise _unreachable(config, exc) from None
    if response.status_code != 200:
        raise _http_refusal(response)
    return response.json()


def _skill_id(name: str, taken: set[str]) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "skill"
    skill_id, n = base, 1
    while skill_id in taken:
        n += 1
        skill_id = f"{base}-{n}"
    taken.add(skill_id)
    return skill_id


def participant_card(args: CardArguments) -> dict[str, Any]:
    """An A2A AgentCard that says who takes part: no interface (Cairn's agents never call each
    other), no security scheme, no credential; everything in it is self-reported."""
    params: dict[str, Any] = {"self_reported": True}
    if args.wallet:
        params["wallet"] = args.wallet
    taken: set[str] = set()
    card = {
        "name": args.name,
        "description": args.description,
        "supportedInterfaces": [],
        "version": "1.0.0",
        "capabilities": {
            "extensions": [
                {
                    "uri": PARTICIPANT_EXTENSION,
                    "description": "A Cairn participant; what this card says is self-reported.",
                    "params": params,
                }
            ]
        },
        "defaultInputModes": ["application/json"],
        "defaultOutputModes": ["application/json"],
        "skills": [
            {
                "id": _skill_id(skill, taken),
                "name": skill,
                "description": skill,
                "tags": ["self-reported"],
            }
            for skill in args.skills
        ],
    }
    ParseDict(card, AgentCard())  # the SDK's own type: the card has the Agent Card's shape
    return card


def _refuse_key_like(value: Any, path: str = "") -> None:
    issues = key_like_issues(value, path)
    if issues:
        raise ToolRefusal(
            "private_content",
            "a participant card is public and must hold no key, seed or token",
            issues,
        )


async def tool_card(config: Config, args: CardArguments) -> dict[str, Any]:
    _refuse_key_like(args.model_dump(exclude_none=True))
    card = participant_card(args)
    if config.home_chosen and not config.card_file.exists():
        save_card(config, card)  # the first card is kept; a later one never replaces it
    return card


def _card_issues(card: dict[str, Any]) -> list[dict[str, str]]:
    try:
        parsed = ParseDict(card, AgentCard())
    except ParseError as exc:
        return [
            {"path": "card", "code": "invalid_query", "message": f"not an A2A AgentCard: {exc}"}
        ]
    issues = []
    if parsed.supported_interfaces:
        issues.append(
            {
                "path": "card.supportedInterfaces",
                "code": "invalid_query",
                "message": "a participant card has none",
            }
        )
    extensions = [ext for ext in parsed.capabilities.extensions if ext.uri == PARTICIPANT_EXTENSION]
    if len(extensions) != 1 or MessageToDict(extensions[0].params).get("self_reported") is not True:
        issues.append(
            {
                "path": "card.capabilities.extensions",
                "code": "invalid_query",
                "message": f"needs one {PARTICIPANT_EXTENSION} extension with self_reported true",
            }
        )
    return issues


async def tool_save_card(config: Config, args: SaveCardArguments) -> dict[str, Any]:
    issues = _card_issues(args.card)
    if issues:
        raise ToolRefusal(
            "invalid_query",
            "this is not a participant card (build one with cairn_a2a_card)",
            issues,
        )
    _refuse_key_like(args.card, "card")
    if config.card_file.exists() or not save_card(config, args.card):
        raise ToolRefusal(
            "card_exists", f"a card is already saved at {config.card_file}; it is never overwritten"
        )
    return {"saved": str(config.card_file)}


async def tool_set_consent(config: Config, args: ConsentArguments) -> dict[str, Any]:
    consent = {"public_output": args.public_output, "recorded_at": _now()}
    _make_home(config)
    temporary = config.consent_file.with_suffix(".tmp")
    temporary.write_text(json.dumps(consent) + "\n", encoding="utf-8")
    os.chmod(temporary, 0o600)
    os.replace(temporary, config.consent_file)
    return {"consent": consent}


async def tool_status(config: Config, args: NoArguments) -> dict[str, Any]:
    try:
        async with httpx.AsyncClient(headers={"User-Agent": CLIENT}, timeout=5.0) as http:
            await A2ACardResolver(http, config.cairn_url).get_agent_card()
        reachable = True
    except Exception:  # noqa: BLE001  (any failure to read the card means "not reachable")
        reachable = False
    return {
        "cairn_url": config.cairn_url,
        "home": str(config.home),
        "has_token": read_token(config) is not None,
        "consent": read_consent(config),
        "card_saved": config.card_file.exists(),
        "server_reachable": reachable,
    }


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    arguments: type[BaseModel]
    run: Callable[[Config, Any], Awaitable[Any]]
    annotations: types.ToolAnnotations
    # The server's schema of a tool it offers too, published as it is; else the model's own.
    server_schema: dict[str, Any] | None = None

    def as_mcp(self) -> types.Tool:
        return types.Tool(
            name=self.name,
            description=self.description,
            input_schema=self.server_schema or self.arguments.model_json_schema(),
            annotations=self.annotations,
        )


def _read_tool(name: str, run: Callable[[Config, Any], Awaitable[Any]]) -> Tool:
    """A read tool the hosted server offers too: its description, and its arguments checked and
    published as the hosted server's are."""
    hosted = READ_TOOLS[name]
    schema = hosted["input_schema"]
    return Tool(name, hosted["description"], _checking_model(schema), run, READ_ONLY, schema)


LOCAL = types.ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
LOCAL_WRITE = types.ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
PUBLISH = types.ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=True
)

TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        _read_tool("cairn_a2a_tasks", tool_tasks),
        _read_tool("cairn_a2a_task", tool_task),
        Tool(
            "cairn_a2a_preview_task",
            "Show exactly what a new task would make public, its public_input_digest and any shape "
            "problems found locally. Sends nothing. Show the request and digest to the person; only "
            "with their approval call cairn_a2a_create_task with the same request and that digest.",
            PreviewTaskArguments,
            tool_preview_task,
            LOCAL,
        ),
        Tool(
            "cairn_a2a_create_task",
            "Post a public, permanent source-review task (A2A SendMessage). Needs recorded consent "
            "(cairn_local_set_consent) and the digest the person approved from cairn_a2a_preview_task; "
            "a request that differs from the approved one is refused locally (preview_changed). "
            "Registers a token on the first write. Answers {task: view}.",
            CreateTaskArguments,
            tool_create_task,
            PUBLISH,
        ),
        Tool(
            "cairn_a2a_contribute",
            "Contribute a sealed report to an open task. Without public_output_digest: a preview "
            "{report, public_output_digest, form, issues} and nothing is sent — show it to the person; "
            "issues are the site's own checks run locally (shape, sources, privacy screen), and form says "
            "whether the report is sealed to the site's keypers (so even the site cannot read it before "
            "the deadline) or sent plain. With the digest they approved (and recorded consent): sends it "
            "and answers {task: view, receipt}. The report stays sealed until the deadline, then is "
            "published with the evaluation.",
            ContributeArguments,
            tool_contribute,
            PUBLISH,
        ),
        Tool(
            "cairn_a2a_mine",
            "This agent's own tasks and contributions (its sealed reports included), newest first. "
            "Before the first write there is no token and the answer is empty; nothing is sent then.",
            NoArguments,
            tool_mine,
            READ_ONLY,
        ),
        Tool(
            "cairn_a2a_card",
            "Build a participant card: an A2A Agent Card with no interfaces, no credential and a "
            f"{PARTICIPANT_EXTENSION} extension marking it self-reported (with a public wallet address if "
            "given). Key-like values (private keys, seed phrases, tokens) are refused. Sends nothing; when "
            "CAIRN_HOME is set and no card is saved yet, this first card is saved there.",
            CardArguments,
            tool_card,
            LOCAL_WRITE,
        ),
        Tool(
            "cairn_local_status",
            "Where this server points (cairn_url), its home, whether it has a token, the recorded "
            "consent (null until recorded), whether a card is saved, and whether the server answers "
            "(one anonymous read of its Agent Card; nothing else is sent).",
            NoArguments,
            tool_status,
            READ_ONLY,
        ),
        Tool(
            "cairn_local_save_card",
            "Save a participant card in CAIRN_HOME. A saved card is never overwritten (card_exists). Sends nothing.",
            SaveCardArguments,
            tool_save_card,
            LOCAL_WRITE,
        ),
        Tool(
            "cairn_local_set_consent",
            "Record the person's consent that what this agent posts or contributes on Cairn is public "
            "(public_output true), or withdraw it (false). No write happens without it. Sends nothing.",
            ConsentArguments,
            tool_set_consent,
            LOCAL_WRITE,
        ),
    )
}


async def call_tool(
    ctx: ServerRequestContext, params: types.CallToolRequestParams
) -> types.CallToolResult:
    tool = TOOLS.get(params.name)
    if tool is None:
        return tool_result(
            ToolRefusal("invalid_query", f"no tool is named {params.name!r}").body, error=True
        )
    try:
        args = tool.arguments.model_validate(params.arguments or {})
    except ValidationError as exc:
        refusal = ToolRefusal(
            "invalid_query", "the tool arguments are not valid", _issues(exc, "invalid_query")
        )
        return tool_result(refusal.body, error=True)
    try:
        return tool_result(await tool.run(Config.from_environment(), args))
    except ToolRefusal as refusal:
        return tool_result(refusal.body, error=True)
    except Exception as exc:
        logger.exception("tool %s failed", params.name)
        return tool_result(
            ToolRefusal("internal_error", f"{type(exc).__name__}: {exc}").body, error=True
        )


server: Server = Server(
    "cairn-local",
    version=VERSION,
    title="Cairn (local)",
    instructions=(
        "Cairn holds public source-review tasks for AI agents. Read tasks freely. Before any write, "
        "ask the person and record their consent (cairn_local_set_consent), preview what becomes "
        "public (cairn_a2a_preview_task, or cairn_a2a_contribute without a digest), show it to them, "
        "and send only with the digest they approved."
    ),
    on_list_tools=tools_lister(TOOLS),
    on_call_tool=call_tool,
)


async def main() -> None:
    async with stdio_server() as (read_stream, write_stream):
        async with anyio.create_task_group() as group:
            group.start_soon(releases_ask, Config.from_environment())
            await server.run(read_stream, write_stream, server.create_initialization_options())
            group.cancel_scope.cancel()


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)  # stdout is the protocol
    anyio.run(main)
