"""Every answer under `/api/` is JSON (SPEC §1): Django's own 404 (or its debug page) and 405 are
rewritten into the SPEC §6 body, keeping `Allow` and the headers set so far."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse

from core.errors import ErrorCode, Refusal, method_not_allowed
from core.middleware import ResponseMiddleware, with_headers_of


def _is_answer(response: HttpResponse) -> bool:
    """JSON, or plain text a view chose (the witness protocol's refusals, §15.4): never Django's."""
    media = response.get("Content-Type", "").split(";")[0].strip()
    return media.endswith("json") or media == "text/plain"


class ApiJsonMiddleware(ResponseMiddleware):
    def respond(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if (
            not request.path.startswith("/api/")
            or response.status_code not in (404, 405)
            or _is_answer(response)
        ):
            return response
        if response.status_code == 404:
            refusal = Refusal(
                ErrorCode.NOT_FOUND, "nothing is at this path (see /api/openapi.json)"
            )
        else:
            allowed = [method.strip() for method in response.get("Allow", "").split(",")]
            refusal = method_not_allowed(request.method or "", [m for m in allowed if m])
        answer = with_headers_of(
            response, JsonResponse(refusal.as_body(), status=response.status_code)
        )
        answer["Content-Length"] = str(len(answer.content))
        return answer
