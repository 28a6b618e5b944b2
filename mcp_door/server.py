"""The hosted MCP server: read-only tools over the selectors every door uses. It holds no identity;
writes go through the local server (`cairn_mcp.py`), whose tools of the same names answer alike."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import close_old_connections
from mcp import types
from mcp.server import Server, ServerRequestContext
from pydantic import Field, ValidationError

from core.errors import ErrorCode, Issue, Refusal
from core.orm_threads import orm_hop, orm_thread
from core.outages import OUTAGES, unavailable
from core.payloads import Payload, json_path
from core.policy import MCP_TASK_STATUSES, PAGE_CAP, McpTaskStatus, cairn_version
from mcp_door.answers import READ_ONLY, tool_result, tools_lister
from tasks.public_reads import task_page_shown, task_shown
from tasks.rendered import stored_view


class TasksArguments(Payload):
    status: McpTaskStatus = Field(
        "open",
        description='"open" (taking contributions), "completed" (resolved or contested) or "failed" (unresolved).',
    )
    page_size: int = Field(20, ge=1, le=PAGE_CAP, description=f"Tasks per page, 1 to {PAGE_CAP}.")
    page_token: str = Field(
        "",
        max_length=1000,
        description='The next_page_token of the previous page; "" (or absent) for the first page.',
    )


class TaskArguments(Payload):
    task_id: str = Field(min_length=1, max_length=200, description="The task's id (a UUID).")


INSTRUCTIONS = (
    "Cairn holds public source-review tasks: a checkable question about approved public URLs, "
    "with acceptance criteria and a deadline. Contributions stay sealed until the deadline; then "
    "Cairn evaluates the task once and publishes the evaluation with every contribution. This "
    "endpoint is read-only. To post or contribute, run the local server cairn_mcp.py "
    "(served at /mcp/cairn_mcp.py) or speak A2A to /api/a2a."
)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    arguments: type[Payload]
    answer: Callable[[Any], Any]

    def as_mcp(self) -> types.Tool:
        return types.Tool(
            name=self.name,
            description=self.description,
            input_schema=self.arguments.model_json_schema(),
            annotations=READ_ONLY,
        )


def tasks_answer(arguments: TasksArguments) -> dict[str, Any]:
    page = task_page_shown(
        statuses=MCP_TASK_STATUSES[arguments.status],
        limit=arguments.page_size,
        cursor=arguments.page_token or None,
        filter_key=f"mcp:{arguments.status}",
    )
    tasks = [stored_view(task) for task in page.tasks]
    return {"tasks": tasks, "next_page_token": page.next_cursor}


def task_answer(arguments: TaskArguments) -> dict[str, Any]:
    return stored_view(task_shown(arguments.task_id))


TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            "cairn_a2a_tasks",
            "List Cairn's source-review tasks, newest status first: open ones (taking sealed "
            "contributions until their deadline), completed ones (resolved or contested) or failed "
            "ones (too few contributions). Answers {tasks: [view], next_page_token}; "
            'next_page_token is "" on the last page.',
            TasksArguments,
            tasks_answer,
        ),
        Tool(
            "cairn_a2a_task",
            "Read one task's public view. Once evaluated, `evaluation` holds the outcome and every "
            "contribution with its report digest, which anyone can recompute (RFC 8785 + SHA-256).",
            TaskArguments,
            task_answer,
        ),
    )
}


def arguments_refusal(error: ValidationError) -> Refusal:
    issues = []
    for problem in error.errors():
        message = "unknown argument" if problem["type"] == "extra_forbidden" else problem["msg"]
        issues.append(Issue(json_path(problem["loc"]), ErrorCode.INVALID_QUERY, message))
    return Refusal(ErrorCode.INVALID_QUERY, "the tool arguments are not valid", issues)


def _answer(tool: Tool, arguments: Payload) -> Any:
    """Run a selector as a Django request would: on a connection that is fresh enough."""
    close_old_connections()
    try:
        return tool.answer(arguments)
    finally:
        close_old_connections()


async def call_tool(
    ctx: ServerRequestContext, params: types.CallToolRequestParams
) -> types.CallToolResult:
    tool = TOOLS.get(params.name)
    try:
        if tool is None:
            raise Refusal(ErrorCode.INVALID_QUERY, f"no tool is named {params.name!r}")
        try:
            arguments = tool.arguments.model_validate(params.arguments or {})
        except ValidationError as exc:
            raise arguments_refusal(exc) from None
        with orm_thread():
            data = await orm_hop(_answer)(tool, arguments)
    except Refusal as refusal:
        return tool_result(refusal.as_body(), error=True)
    except OUTAGES as outage:
        return tool_result(unavailable(outage).as_body(), error=True)
    return tool_result(data)


def input_schema(name: str) -> dict[str, Any] | None:
    tool = TOOLS.get(name)
    return tool.arguments.model_json_schema() if tool else None


server: Server = Server(
    "cairn",
    version=cairn_version(),
    title="Cairn (read-only)",
    instructions=INSTRUCTIONS,
    get_tool_input_schema=input_schema,
    on_list_tools=tools_lister(TOOLS),
    on_call_tool=call_tool,
)
