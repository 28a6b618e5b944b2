"""What the hosted MCP door and the local server (`cairn_mcp.py`) answer alike (SPEC §10). The
local server is built with this module's text in it (`core.amalgam`), so it imports no Django."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from mcp import types
from mcp.server import ServerRequestContext

READ_ONLY = types.ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True
)


class Listed(Protocol):
    def as_mcp(self) -> types.Tool: ...


def tools_lister(
    tools: Mapping[str, Listed],
) -> Callable[
    [ServerRequestContext, types.PaginatedRequestParams | None], Awaitable[types.ListToolsResult]
]:
    async def list_tools(
        ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool.as_mcp() for tool in tools.values()])

    return list_tools


def tool_result(data: Any, *, error: bool = False) -> types.CallToolResult:
    content = [types.TextContent(type="text", text=json.dumps(data, ensure_ascii=False))]
    if error:
        return types.CallToolResult(content=content, is_error=True)
    return types.CallToolResult(content=content, structured_content=data)
