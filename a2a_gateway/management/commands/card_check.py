"""`manage.py card_check`: fail, naming each problem, where the Agent Card is untrue or unsigned."""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from a2a_gateway.card import CARD_PATH, agent_card_json
from a2a_gateway.card_check import CHECK_SITE, card_problems
from core.site import site_url
from ledger.keys import JWKS_PATH
from ledger.keys import jwks as site_jwks


def _fetch_json(url: str, what: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.load(response)
    except (OSError, ValueError) as exc:
        raise CommandError(f"cannot fetch {what} from {url}: {exc}") from None


class Command(BaseCommand):
    help = (
        "Check the A2A Agent Card against the code: every skill is a SendMessage operation the gateway "
        "dispatches, with a description and tags, and the extension's schemas are the payload models' schemas. "
        "By default the card built from the code is checked; --card checks a saved card, --url a served one. "
        "The card's signature must verify: with this site's key, or for --url with that site's JWKS."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        source = parser.add_mutually_exclusive_group()
        source.add_argument(
            "--card", metavar="FILE", help="a card saved as JSON ('-' reads standard input)"
        )
        source.add_argument(
            "--url", metavar="SITE", help="a running Cairn, e.g. http://127.0.0.1:8000"
        )

    def handle(
        self, *args: Any, card: str | None = None, url: str | None = None, **options: Any
    ) -> None:
        jwks = site_jwks()
        if card:
            source = "standard input" if card == "-" else card
            try:
                text = sys.stdin.read() if card == "-" else Path(card).read_text(encoding="utf-8")
                document = json.loads(text)
            except (OSError, ValueError) as exc:
                raise CommandError(f"cannot read a JSON card from {source}: {exc}") from None
        elif url:
            site = url.rstrip("/")
            source = site + CARD_PATH
            document = _fetch_json(source, "the card")
            jwks = _fetch_json(site + JWKS_PATH, "the site's keys")
        else:
            source = "the code"
            document = agent_card_json(site_url() or CHECK_SITE)

        problems = card_problems(document, jwks=jwks)
        if problems:
            listing = "\n".join(f"  - {problem}" for problem in problems)
            raise CommandError(f"the Agent Card from {source} does not match the code:\n{listing}")
        skills = ", ".join(skill["id"] for skill in document["skills"])
        self.stdout.write(
            self.style.SUCCESS(
                f"OK: the Agent Card from {source} matches the code and its signature verifies "
                f"(skills: {skills})"
            )
        )
