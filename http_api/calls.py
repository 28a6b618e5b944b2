"""The plain HTTP routes of open calls (SPEC §7): list, one call with its answers, answer one."""

from __future__ import annotations

from rest_framework.request import Request
from rest_framework.response import Response

from calls.selectors import call_detail, call_get, call_page, call_view
from calls.services import call_answer
from core.caching import Shown, mark_shown
from core.policy import CALL_MODES
from http_api.inputs import query_none, query_page
from http_api.views import NEGOTIATED, ApiView


class CallListApi(ApiView):
    def get(self, request: Request) -> Response:
        mode, limit, cursor = query_page(request, modes=CALL_MODES)
        calls, next_cursor = call_page(mode=mode, limit=limit, cursor=cursor)
        views = [call_view(call) for call in calls]
        response = Response({"calls": views, "next_cursor": next_cursor or None})
        return mark_shown(response, Shown(vary=NEGOTIATED))


class CallDetailApi(ApiView):
    def get(self, request: Request, call_id: str) -> Response:
        query_none(request)
        view = call_detail(call_get(call_id))
        return mark_shown(Response(view), Shown(vary=NEGOTIATED))


class CallAnswerApi(ApiView):
    def post(self, request: Request, call_id: str) -> Response:
        return self.write(request, call_answer, call_id=call_id)
