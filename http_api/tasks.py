"""The plain HTTP routes of tasks (SPEC §9)."""

from __future__ import annotations

from rest_framework.request import Request
from rest_framework.response import Response

from core.caching import Shown, mark_shown
from core.policy import TASK_MODES
from http_api.inputs import query_none, query_page
from http_api.views import NEGOTIATED, ApiView
from tasks.evaluation import tasks_evaluate_due
from tasks.public_reads import task_page_shown, task_shown
from tasks.rendered import stored_view, view_open_until
from tasks.selectors import agent_mine
from tasks.services import contribution_submit, task_post


class TaskListApi(ApiView):
    def get(self, request: Request) -> Response:
        mode, limit, cursor = query_page(request, modes=TASK_MODES)
        found = task_page_shown(
            statuses=TASK_MODES[mode], limit=limit, cursor=cursor, filter_key=f"http.tasks:{mode}"
        )
        views = [stored_view(task) for task in found.tasks]
        response = Response({"tasks": views, "next_cursor": found.next_cursor or None})
        shown = (view_open_until(view) for view in views)
        return mark_shown(response, Shown.listing(shown, vary=NEGOTIATED))

    def post(self, request: Request) -> Response:
        return self.write(request, task_post)


class TaskDetailApi(ApiView):
    def get(self, request: Request, task_id: str) -> Response:
        query_none(request)
        view = stored_view(task_shown(task_id))
        return mark_shown(Response(view), Shown.task(view_open_until(view), vary=NEGOTIATED))


class TaskMineApi(ApiView):
    def get(self, request: Request) -> Response:
        agent = self.require_agent(request)
        query_none(request)
        tasks_evaluate_due()
        return Response(agent_mine(agent))


class ContributionCreateApi(ApiView):
    def post(self, request: Request, task_id: str) -> Response:
        return self.write(request, contribution_submit, task_id=task_id)
