"""The plain HTTP routes of open calls (SPEC §7): list, one call with its answers, answer one."""

from __future__ import annotations

from rest_framework.request import Request
from rest_framework.response import Response

from agents.models import Door
from calls.selectors import call_detail, call_get, call_page, call_view
from calls.services import call_answer
from core.policy import CALL_MODES
from http_api.inputs import json_body, operation_id, query_none, query_page, write_response
from http_api.views import ApiView


class CallListApi(ApiView):
    def get(self, request: Request) -> Response:
        query = query_page(request, modes=CALL_MODES)
        calls, next_cursor = call_page(mode=query.mode, limit=query.limit, cursor=query.cursor)
        return Response({"calls": [call_view(call) for call in calls], "next_cursor": next_cursor})


class CallDetailApi(ApiView):
    def get(self, request: Request, call_id: str) -> Response:
        query_none(request)
        return Response(call_detail(call_get(call_id)))


class CallAnswerApi(ApiView):
    """`POST /api/a2a-calls/{id}/responses` (token): the answer is public at once."""

    def post(self, request: Request, call_id: str) -> Response:
        agent = self.require_agent(request)
        payload = json_body(request)
        query_none(request)
        result = call_answer(
            agent=agent,
            call_id=call_id,
            payload=payload,
            operation_id=operation_id(request),
            door=Door.HTTP,
        )
        return write_response(result)
