"""System checks: the Agent Card must advertise what the gateway does, and nothing else, and
(`check --deploy`) no interface its clients cannot reach."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register

from core.site import is_loopback

# The site only shapes URLs on the card, which the check does not judge.
CHECK_SITE = "http://cairn.invalid"


@register("cairn")
def agent_card_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    from a2a_gateway.card import agent_card_json
    from a2a_gateway.card_check import card_problems

    return [
        Error(
            problem,
            hint="The card is derived from a2a_gateway/operations.py; run manage.py card_check.",
            id="a2a_gateway.E001",
        )
        for problem in card_problems(agent_card_json(CHECK_SITE))
    ]


@register("cairn", deploy=True)
def grpc_reachable_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A site that takes its origin from each request (no `CAIRN_SITE_URL`; start-up refuses the
    same with one set) and answers to hosts other machines reach, while its card gives a gRPC
    address only this machine reaches."""
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
