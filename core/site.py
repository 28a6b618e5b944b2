"""This site's origin, the one rule every door uses to write absolute URLs."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def site_url(request: HttpRequest | None = None) -> str:
    """`CAIRN_SITE_URL`, or the origin the request came to: clients call the URL on the card."""
    if settings.CAIRN_SITE_URL or request is None:
        return settings.CAIRN_SITE_URL
    return f"{request.scheme}://{request.get_host()}"
