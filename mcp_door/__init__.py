"""The MCP doors (SPEC §10): the hosted read-only endpoint at `/api/mcp` and the download of the
local single-file server (`local_mcp/cairn_mcp.py`) at `/mcp/cairn_mcp.py`."""
