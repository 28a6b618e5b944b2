"""The download of the local MCP server (SPEC §1, §10). `/api/mcp` is not a Django URL: the ASGI
router in `cairn/asgi.py` sends it to the MCP SDK."""

from django.urls import path

from mcp_door import views

urlpatterns = [
    path("mcp/cairn_mcp.py", views.local_server_file, name="mcp-local-server"),
    path("mcp/requirements.txt", views.local_server_requirements, name="mcp-local-requirements"),
]
