"""The parity corpus starts the local MCP server the way the MCP door's tests do."""

from tests.mcp.conftest import local_server

__all__ = ["local_server"]
