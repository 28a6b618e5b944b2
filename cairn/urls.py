from django.contrib import admin
from django.urls import include, path

from agents.apis import AgentRegisterApi

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/agent/register", AgentRegisterApi.as_view(), name="agent-register"),
    path("", include("a2a_gateway.urls")),
    path("", include("ledger.urls")),
    path("", include("cairn.api_urls")),
    path("", include("cairn.page_urls")),
    path("", include("mcp_door.urls")),
    path("", include("ops.urls")),
]
