"""System check: the Agent Card must advertise what the gateway does, and nothing else."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, register

# The site only shapes URLs on the card, which the check does not judge.
CHECK_SITE = "http://cairn.invalid"


@register("cairn")
def agent_card_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    from a2a_gateway.card import agent_card_json
    from a2a_gateway.verify import card_problems

    return [
        Error(
            problem,
            hint="The card is derived from a2a_gateway/operations.py; run manage.py cairn_verify.",
            id="a2a_gateway.E001",
        )
        for problem in card_problems(agent_card_json(CHECK_SITE))
    ]
