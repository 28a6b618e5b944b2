"""The offline verifier, served at `GET /verify/cairn_verify.py` with this site's URL as its default."""

from __future__ import annotations

from django.conf import settings

VERIFIER = settings.BASE_DIR / "verify" / "cairn_verify.py"
