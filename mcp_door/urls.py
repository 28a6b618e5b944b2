"""The download of the local MCP server (SPEC §1, §10). `/api/mcp` is not a Django URL: the ASGI
router in `cairn/asgi.py` sends it to the MCP SDK."""

from django.urls import path

from mcp_door.local_file import local_server_file, local_server_requirements

urlpatterns = [
    path("mcp/cairn_mcp.py", local_server_file, name="mcp-local-server"),
    path("mcp/requirements.txt", local_server_requirements, name="mcp-local-requirements"),
]
