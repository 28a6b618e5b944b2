"""The site's own 404 and 500 pages, DEBUG or not: under DEBUG Django would answer an unknown path
with a technical page listing every route, and an exception with its traceback (which still goes to
the log). `/admin/` keeps Django's pages and `/api/` its JSON answers."""

from __future__ import annotations

import logging

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import Resolver404, resolve
from django.views.defaults import page_not_found, server_error

from core.middleware import ResponseMiddleware

_OWN_PAGES = ("/admin/", "/api/")
_log = logging.getLogger("django.request")


def _branded(request: HttpRequest) -> bool:
    return settings.DEBUG and not request.path.startswith(_OWN_PAGES)


class BrandedErrorsMiddleware(ResponseMiddleware):
    """Sits before OutageMiddleware, so a database outage is still answered by that one's 503."""

    def respond(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if response.status_code == 404 and _branded(request):
            try:
                resolve(request.path_info)
            except Resolver404:
                return page_not_found(request, Http404())
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not _branded(request):
            return None
        if isinstance(exception, Http404):
            return page_not_found(request, exception)
        _log.error("Internal Server Error: %s", request.path, exc_info=exception)
        return server_error(request)
