"""The Host rule for the endpoints that the ASGI router serves without Django's request cycle."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.http.request import split_domain_port, validate_host

# What Django itself serves when DEBUG is on and ALLOWED_HOSTS is empty (HttpRequest.get_host).
DEBUG_HOSTS = [".localhost", "127.0.0.1", "[::1]"]


@lru_cache(maxsize=64)
def host_served(host: str) -> bool:
    """Whether Django would serve a request with this Host header, so every path refuses alike.
    Kept per Host (a site answers to a few): Django's parsing is a noticeable share of a stored
    read's cost."""
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = DEBUG_HOSTS
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed)


def _hosts_changed(*, setting: str, **kwargs: Any) -> None:
    if setting in ("ALLOWED_HOSTS", "DEBUG"):
        host_served.cache_clear()


setting_changed.connect(_hosts_changed)
