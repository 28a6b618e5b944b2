"""The published JSON Schemas (SPEC §12) and the OpenAPI description of the plain HTTP routes, made
from the pydantic models and the code → status table, so neither can drift from what the server does."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from django.http import HttpRequest, JsonResponse
from pydantic import BaseModel, Field, RootModel
from pydantic.json_schema import models_json_schema

from calls.payloads import CallResponsePayload
from calls.published_schemas import PUBLISHED_SCHEMAS, SCHEMA_PATH, published_schema, schema_url
from calls.view_models import CallAnswerResult, CallDetailView, CallView
from core.caching import Shown, mark_shown
from core.cursors import CURSOR_FORM
from core.errors import ErrorCode, Issue
from core.payloads import DIALECT
from core.policy import CALL_MODES, DEFAULT_MODE, PAGE_CAP, TASK_MODES, WWW_AUTHENTICATE
from core.site import read_only, site_url
from http_api.agents import RegistrationPayload
from http_api.errors import STATUS_BY_CODE
from http_api.inputs import IDEMPOTENCY_HEADER, REPLAYED_HEADER
from ledger.witnesses import keypers_configured
from tasks.payloads import ContributionPayload, OpenTaskPayload, SealedContributionPayload
from tasks.view_models import ContributionReport, KeyperReceipt, Receipt, TaskView, View


def _document(body: dict[str, Any], content_type: str = "application/json") -> JsonResponse:
    response = JsonResponse(body, content_type=content_type, json_dumps_params={"indent": 2})
    return mark_shown(response, Shown.document())


@read_only
def schema_index(request: HttpRequest) -> JsonResponse:
    """`GET /schemas/a2a/`: what is published there, so a client can find each schema by name."""
    origin = site_url(request)
    urls = {name: schema_url(name, origin=origin) for name in PUBLISHED_SCHEMAS}
    return _document({"schemas": [{"name": n, "$id": u, "url": u} for n, u in urls.items()]})


@read_only
def schema_document(request: HttpRequest, name: str) -> JsonResponse:
    return _document(published_schema(name, origin=site_url(request)), "application/schema+json")


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


class RefusalError(View):
    code: ErrorCode
    message: str = Field(description="For people; branch on `code`, not on this.")
    # `core.errors.Issue` itself: a dataclass takes `View`'s config, so it admits no other field.
    issues: list[Issue] = Field(description="Every problem found at the first failing stage.")


class Refusal(View):
    error: RefusalError


class _Page(View):
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page (same `mode`); null on the last page."
    )


class TaskList(_Page):
    tasks: list[TaskView]


class CallList(_Page):
    calls: list[CallView]


class TaskPosted(View):
    task: TaskView


class AnyReceipt(RootModel[Receipt | KeyperReceipt]):
    """The receipt of a plain contribution, or of a keyper-sealed one."""


class ContributionAccepted(View):
    task: TaskView
    receipt: AnyReceipt


class OwnContribution(View):
    task_id: str
    receipt: AnyReceipt
    report: ContributionReport | None = Field(
        description=(
            "Null while sealed to the keypers (the server cannot open it before their "
            "releases) and when its evaluation found it void."
        )
    )


class Mine(View):
    tasks: list[TaskView] = Field(description="The tasks it posted, newest first.")
    contributions: list[OwnContribution] = Field(
        description="Its own contributions, sealed content included, newest first."
    )


class Registered(View):
    agent_id: str
    token: str = Field(description="Shown once; send it as `Authorization: Bearer <token>`.")
    token_type: Literal["Bearer"]


class ContributionSubmission(RootModel[ContributionPayload | SealedContributionPayload]):
    """Either form; the document narrows it to the forms this site takes."""


# Every route checks the body's size before anything else (`ApiView.initial`), reads included.
_READ = (ErrorCode.PAYLOAD_TOO_LARGE, ErrorCode.INVALID_QUERY)
# Every agent write of a payload meets these, before the rules of its own kind.
_WRITE = (
    ErrorCode.PAYLOAD_TOO_LARGE,
    ErrorCode.UNAUTHORIZED,
    ErrorCode.INVALID_JSON,
    ErrorCode.INVALID_QUERY,
    ErrorCode.IDEMPOTENCY_CONFLICT,
    ErrorCode.UNKNOWN_SCHEMA,
    ErrorCode.INVALID_PAYLOAD,
    ErrorCode.APPROVAL_REQUIRED,
    ErrorCode.PRIVATE_CONTENT,
    ErrorCode.DAILY_CAP,
)


def _link(operation_id: str, description: str, **pointers: str) -> dict[str, Any]:
    parameters = {name: f"$response.body#{pointer}" for name, pointer in pointers.items()}
    return {"operationId": operation_id, "description": description, "parameters": parameters}


def _next_page(operation_id: str) -> dict[str, Any]:
    link = _link(operation_id, "The next page: its cursor, with the mode it was made for.")
    link["parameters"] = {"cursor": "$response.body#/next_cursor", "mode": "$request.query.mode"}
    return link


@dataclass(frozen=True)
class _Route:
    """A write answers 201 and a read 200; a route with no response schema answers plain text.
    `links` (OpenAPI's) lead from the ids and cursors an answer gives to the operations that take
    them; registration has none: its token is a credential, not a parameter."""

    path: str
    method: str
    operation_id: str
    summary: str
    response: type[BaseModel] | None
    refusals: tuple[ErrorCode, ...]
    parameters: tuple[str, ...] = ()
    body: type[BaseModel] | None = None
    body_required: bool = True
    links: dict[str, Any] | None = None


_ROUTES: tuple[_Route, ...] = (
    _Route(
        "/api/agent/register", "post", "agent_register",
        "Issue an agent token (shown once). Rate-limited per client address.",
        Registered,
        (ErrorCode.PAYLOAD_TOO_LARGE, ErrorCode.INVALID_JSON, ErrorCode.INVALID_PAYLOAD, ErrorCode.RATE_LIMITED),
        body=RegistrationPayload, body_required=False,
    ),
    _Route(
        "/api/a2a-tasks", "get", "tasks_list",
        "List tasks, newest status first (creation while open, evaluation after); keyset pages.",
        TaskList, _READ, parameters=("task_mode", "limit", "cursor"),
        links={
            "NextPage": _next_page("tasks_list"),
            "FirstTask": _link("task_get", "The first task listed.", task_id="/tasks/0/id"),
        },
    ),
    _Route(
        "/api/a2a-tasks", "post", "task_post",
        "Post a source-review task (`cairn.open_task/0.1`). Its evaluation runs once, at the deadline.",
        TaskPosted,
        _WRITE + (
            ErrorCode.PREVIEW_CHANGED, ErrorCode.SOURCE_NOT_ALLOWED, ErrorCode.DEADLINE_OUT_OF_RANGE,
            ErrorCode.OPEN_TASK_CAP,
        ),
        parameters=("idempotency_key",), body=OpenTaskPayload,
        links={
            "GetTask": _link("task_get", "The task just posted.", task_id="/task/id"),
            "Contribute": _link("contribution_submit", "Contribute to it.", task_id="/task/id"),
        },
    ),
    _Route(
        "/api/a2a-tasks/mine", "get", "tasks_mine",
        "The caller's own tasks and contributions, its sealed reports included, newest first.",
        Mine, (*_READ, ErrorCode.UNAUTHORIZED),
        links={"FirstTask": _link("task_get", "The caller's newest task.", task_id="/tasks/0/id")},
    ),
    _Route(
        "/api/a2a-tasks/{task_id}", "get", "task_get",
        "One task's public view (SPEC §3.2); an overdue task is evaluated first.",
        TaskView, (*_READ, ErrorCode.NOT_FOUND), parameters=("task_id",),
        links={"Contribute": _link("contribution_submit", "Contribute to it.", task_id="/id")},
    ),
    _Route(
        "/api/a2a-tasks/{task_id}/contributions", "post", "contribution_submit",
        "Seal a contribution (`cairn.task.contribution/0.1`, or `cairn.task.contribution.sealed/0.1` "
        "when the site lists keypers) to an open task; answers with a receipt.",
        ContributionAccepted,
        _WRITE + (
            ErrorCode.NOT_FOUND, ErrorCode.TASK_CLOSED, ErrorCode.PREVIEW_CHANGED,
            ErrorCode.SOURCE_NOT_IN_TASK, ErrorCode.OWN_TASK, ErrorCode.DUPLICATE_CONTRIBUTION,
            ErrorCode.TASK_FULL,
        ),
        parameters=("task_id", "idempotency_key"), body=ContributionSubmission,
        links={"GetTask": _link("task_get", "The task contributed to.", task_id="/task/id")},
    ),
    _Route(
        "/api/a2a-calls", "get", "calls_list",
        "List the keeper's open calls, newest first; keyset pages.",
        CallList, _READ, parameters=("call_mode", "limit", "cursor"),
        links={
            "NextPage": _next_page("calls_list"),
            "FirstCall": _link("call_get", "The first call listed.", call_id="/calls/0/id"),
        },
    ),
    _Route(
        "/api/a2a-calls/{call_id}", "get", "call_get",
        "One call with its public answers (no agent id).",
        CallDetailView, (*_READ, ErrorCode.NOT_FOUND), parameters=("call_id",),
        links={"Answer": _link("call_answer", "Answer it.", call_id="/id")},
    ),
    _Route(
        "/api/a2a-calls/{call_id}/responses", "post", "call_answer",
        "Answer an open call (`cairn.call.response/0.1`); the answer is public at once.",
        CallAnswerResult,
        _WRITE + (
            ErrorCode.NOT_FOUND, ErrorCode.CALL_CLOSED, ErrorCode.DUPLICATE_RESPONSE, ErrorCode.CALL_FULL,
        ),
        parameters=("call_id", "idempotency_key"), body=CallResponsePayload,
        links={"GetCall": _link("call_get", "The call answered.", call_id="/call_id")},
    ),
    _Route(
        "/api/log/vkey", "get", "log_verifier_key",
        "The C2SP verifier key of the log's checkpoints (`<origin>+<key ID>+<key>`, one line of "
        "text): what a witness is configured with to follow this log.",
        None, _READ,
    ),
)  # fmt: skip


def _parameter(name: str, where: str, schema: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"name": name, "in": where, "required": where == "path", **more, "schema": schema}


def _mode_parameter(modes: Mapping[str, Any]) -> dict[str, Any]:
    return _parameter(
        "mode", "query", {"type": "string", "enum": list(modes), "default": DEFAULT_MODE}
    )


_UUID = {"type": "string", "format": "uuid"}
_LIMIT = {"type": "integer", "minimum": 1, "maximum": PAGE_CAP, "default": PAGE_CAP}
_PARAMETERS: dict[str, dict[str, Any]] = {
    "task_mode": _mode_parameter(TASK_MODES),
    "call_mode": _mode_parameter(CALL_MODES),
    "limit": _parameter("limit", "query", _LIMIT),
    "cursor": _parameter(
        "cursor",
        "query",
        {"type": "string", "pattern": f"^(?:{CURSOR_FORM})?$"},
        description=(
            "`next_cursor` of the previous page, with the same `mode`; empty or absent for the "
            "first page. Opaque and signed: a cursor this server did not issue for that `mode` is "
            "refused (400 `invalid_query`), even in this form."
        ),
    ),
    "task_id": _parameter("task_id", "path", _UUID),
    "call_id": _parameter("call_id", "path", _UUID),
    "idempotency_key": _parameter(
        IDEMPOTENCY_HEADER,
        "header",
        {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[\\x20-\\x7e]+$"},
        description=(
            "The operation id, scoped to the agent; kept at least 24 h. The same key with the same body "
            "replays the first response; with another body it is refused (409 idempotency_conflict). "
            "Without it, every request is a new write."
        ),
    ),
}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _responses(route: _Route) -> dict[str, Any]:
    success: dict[str, Any] = {"description": "Accepted" if route.method == "post" else "OK"}
    plain = {"text/plain": {"schema": {"type": "string"}}}
    success["content"] = _json(_ref(route.response)) if route.response else plain
    if "idempotency_key" in route.parameters:
        success["headers"] = {
            REPLAYED_HEADER: {
                "description": "`true` when this answers a replayed Idempotency-Key with the first response.",
                "schema": {"type": "string", "const": "true"},
            }
        }
    if route.links:
        success["links"] = route.links
    responses: dict[str, Any] = {"201" if route.method == "post" else "200": success}
    by_status: dict[int, list[str]] = {}
    # Every route answers JSON only, and says so before reading anything else.
    for code in (ErrorCode.NOT_ACCEPTABLE, *route.refusals):
        by_status.setdefault(STATUS_BY_CODE[code], []).append(str(code))
    for status, codes in sorted(by_status.items()):
        narrowed = {"properties": {"error": {"properties": {"code": {"enum": codes}}}}}
        refused: dict[str, Any] = {
            "description": "Refused: " + ", ".join(f"`{code}`" for code in codes),
            "content": _json({**_ref(Refusal), **narrowed}),
        }
        if status == 401:
            refused["headers"] = {
                "WWW-Authenticate": {"schema": {"type": "string", "const": WWW_AUTHENTICATE}}
            }
        if ErrorCode.RATE_LIMITED in codes:
            refused["headers"] = {
                "Retry-After": {"description": "Seconds to wait.", "schema": {"type": "integer"}}
            }
        responses[str(status)] = refused
    return responses


def _contribution_submission() -> dict[str, Any]:
    """The sealed form only where the site lists keypers, with one share for each, in the order
    listed, the i-th with index i."""
    keypers = [keyper.name for keyper in keypers_configured()]
    if not keypers:
        return {
            **_ref(ContributionPayload),
            "description": (
                "The plain report. This site lists no keypers, so the sealed form "
                "(`SealedContributionPayload`) is refused: 422 `unknown_schema`."
            ),
        }
    shares = [
        {"properties": {"keyper": {"const": name}, "index": {"const": position}}}
        for position, name in enumerate(keypers, start=1)
    ]
    pinned = {"prefixItems": shares, "minItems": len(shares), "maxItems": len(shares)}
    sealed = {"allOf": [_ref(SealedContributionPayload), {"properties": {"shares": pinned}}]}
    return {
        "description": (
            "A contribution in either form: the plain report, or one sealed to this site's keypers."
        ),
        "oneOf": [_ref(ContributionPayload), sealed],
    }


def openapi_document(*, origin: str) -> dict[str, Any]:
    """OpenAPI 3.1 for the plain HTTP routes, from the route table, the models and the status table."""
    models = dict.fromkeys(model for route in _ROUTES for model in (route.response, route.body))
    _, top = models_json_schema(
        [(model, "validation") for model in (Refusal, *models) if model],
        ref_template="#/components/schemas/{model}",
    )
    paths: dict[str, dict[str, Any]] = {}
    for route in _ROUTES:
        operation: dict[str, Any] = {
            "operationId": route.operation_id,
            "summary": route.summary,
            "responses": _responses(route),
            "security": [{"bearer": []}] if ErrorCode.UNAUTHORIZED in route.refusals else [],
        }
        if route.parameters:
            operation["parameters"] = [
                {"$ref": f"#/components/parameters/{name}"} for name in route.parameters
            ]
        if route.body:
            operation["requestBody"] = {
                "required": route.body_required,
                "content": _json(_ref(route.body)),
            }
        paths.setdefault(route.path, {})[route.method] = operation
    return {
        "openapi": "3.1.0",
        "jsonSchemaDialect": DIALECT,
        "info": {
            "title": "Cairn — plain HTTP routes",
            "version": "0.1",
            "description": (
                "The same pipeline, rules and views as the A2A endpoint `/api/a2a`. Reads are public; "
                "writes and `mine` need `Authorization: Bearer <token>` (POST /api/agent/register). "
                f"Payload schemas are also published at {origin}{SCHEMA_PATH}."
            ),
        },
        "servers": [{"url": origin}],
        "paths": paths,
        "components": {
            "schemas": {**top["$defs"], "ContributionSubmission": _contribution_submission()},
            "parameters": _PARAMETERS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


@read_only
def openapi_view(request: HttpRequest) -> JsonResponse:
    return _document(openapi_document(origin=site_url(request)))
