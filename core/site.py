"""This site's origin, the one rule every door uses to write absolute URLs; whether an address is
one only this machine reaches; and what a read-only route answers to any other method."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe

View = TypeVar("View", bound=Callable[..., object])


def site_url(request: HttpRequest | None = None) -> str:
    """`CAIRN_SITE_URL`, or the origin the request came to: clients call the URL on the card."""
    if settings.CAIRN_SITE_URL or request is None:
        return settings.CAIRN_SITE_URL
    return f"{request.scheme}://{request.get_host()}"


def is_loopback(address: str) -> bool:
    """Whether `address` (`host:port`, `[v6]:port` or a URL) is localhost or a loopback IP."""
    if "://" in address:
        host = urlsplit(address).hostname or ""
    else:
        host = address.rpartition(":")[0] if address.count(":") == 1 or "]:" in address else address
        host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_only(view: View) -> View:
    """GET and HEAD only: any other method is 405 with `Allow`, never a CSRF refusal, since such a
    route does nothing a forged request could abuse."""
    return csrf_exempt(require_safe(view))
