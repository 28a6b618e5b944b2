"""The plain HTTP routes (SPEC §7, §9), the published schemas (§12) and the OpenAPI description."""

from django.urls import path

from calls.published_schemas import PUBLISHED_SCHEMAS, SCHEMA_PATH
from http_api.calls import CallAnswerApi, CallDetailApi, CallListApi
from http_api.schema_views import openapi_view, schema_document, schema_index
from http_api.tasks import ContributionCreateApi, TaskDetailApi, TaskListApi, TaskMineApi

urlpatterns = [
    path("api/a2a-tasks", TaskListApi.as_view(), name="api-tasks"),
    # Before `<task_id>`, so `mine` is never taken for an id.
    path("api/a2a-tasks/mine", TaskMineApi.as_view(), name="api-tasks-mine"),
    path("api/a2a-tasks/<str:task_id>", TaskDetailApi.as_view(), name="api-task"),
    path(
        "api/a2a-tasks/<str:task_id>/contributions",
        ContributionCreateApi.as_view(),
        name="api-contributions",
    ),
    path("api/a2a-calls", CallListApi.as_view(), name="api-calls"),
    path("api/a2a-calls/<str:call_id>", CallDetailApi.as_view(), name="api-call"),
    path(
        "api/a2a-calls/<str:call_id>/responses", CallAnswerApi.as_view(), name="api-call-responses"
    ),
    path("api/openapi.json", openapi_view, name="api-openapi"),
    path(SCHEMA_PATH.lstrip("/"), schema_index, name="schema-index"),
    *(
        path(SCHEMA_PATH.lstrip("/") + name, schema_document, {"name": name}, name=f"schema-{name}")
        for name in PUBLISHED_SCHEMAS
    ),
]
