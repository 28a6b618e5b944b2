"""`check --deploy`: the Agent Card must list no interface its clients cannot reach."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Warning, register

from core.site import is_loopback


@register("cairn", deploy=True)
def grpc_reachable_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A gRPC address only this machine reaches, on a site that answers other machines and takes
    its origin from each request (with `CAIRN_SITE_URL` set, start-up refuses the same)."""
    grpc_url = settings.CAIRN_GRPC_URL
    if settings.CAIRN_SITE_URL or not grpc_url or not is_loopback(grpc_url):
        return []
    public = [host for host in settings.ALLOWED_HOSTS if not is_loopback(host)]
    if not public:
        return []
    return [
        Warning(
            f"the Agent Card lists the gRPC address {grpc_url}, which only this machine reaches, "
            f"while the site answers to {', '.join(public)}",
            hint="Set CAIRN_GRPC_URL to the address clients reach, or CAIRN_GRPC_BIND empty to "
            "turn gRPC off.",
            id="a2a_gateway.W001",
        )
    ]
