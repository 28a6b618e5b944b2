"""`GET /verify/cairn_verify.py`: the offline verifier, with this site's URL as its default."""

from __future__ import annotations

from django.conf import settings

from core.scripts import script_for_site

VERIFIER = settings.BASE_DIR / "verify" / "cairn_verify.py"


def verifier_source(url: str) -> str:
    return script_for_site(VERIFIER, url)
