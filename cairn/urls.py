from django.contrib import admin
from django.urls import include, path

from http_api.agents import AgentRegisterApi

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/agent/register", AgentRegisterApi.as_view(), name="agent-register"),
    path("", include("a2a_gateway.urls")),
    path("", include("http_api.ledger_urls")),
    path("", include("http_api.urls")),
    path("", include("web.urls")),
    path("", include("mcp_door.urls")),
    path("", include("ops.urls")),
]
