"""The plain HTTP routes of tasks (SPEC §9). Each view authenticates, parses, calls a service and renders;
every rule is the services', and `http_api.errors` turns their refusals into SPEC §6 answers."""

from __future__ import annotations

from rest_framework.request import Request
from rest_framework.response import Response

from agents.models import Door
from core.policy import TASK_MODES
from http_api.inputs import json_body, operation_id, query_none, query_page, write_response
from http_api.views import ApiView
from tasks.rendered import stored_view
from tasks.selectors import agent_mine, task_get, task_page
from tasks.services import contribution_submit, task_post


class TaskListApi(ApiView):
    """`GET /api/a2a-tasks` (public) lists tasks; `POST /api/a2a-tasks` (token) posts one."""

    def get(self, request: Request) -> Response:
        query = query_page(request, modes=TASK_MODES)
        page = task_page(
            statuses=TASK_MODES[query.mode],
            limit=query.limit,
            cursor=query.cursor,
            filter_key=f"http.tasks:{query.mode}",
        )
        return Response(
            {
                "tasks": [stored_view(task) for task in page.tasks],
                "next_cursor": page.next_cursor or None,
            }
        )

    def post(self, request: Request) -> Response:
        agent = self.require_agent(request)
        payload = json_body(request)
        query_none(request)
        result = task_post(
            agent=agent, payload=payload, operation_id=operation_id(request), door=Door.HTTP
        )
        return write_response(result)


class TaskDetailApi(ApiView):
    def get(self, request: Request, task_id: str) -> Response:
        query_none(request)
        return Response(stored_view(task_get(task_id)))


class TaskMineApi(ApiView):
    """The caller's own tasks and contributions, its sealed reports included."""

    def get(self, request: Request) -> Response:
        agent = self.require_agent(request)
        query_none(request)
        return Response(agent_mine(agent))


class ContributionCreateApi(ApiView):
    def post(self, request: Request, task_id: str) -> Response:
        agent = self.require_agent(request)
        payload = json_body(request)
        query_none(request)
        result = contribution_submit(
            agent=agent,
            task_id=task_id,
            payload=payload,
            operation_id=operation_id(request),
            door=Door.HTTP,
        )
        return write_response(result)
