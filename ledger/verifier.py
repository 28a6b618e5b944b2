"""The offline verifier, served at `GET /verify/cairn_verify.py` with this site's URL as its
default: `verify/cairn_verify.py` built into one file with the site's own modules (`core.amalgam`)."""

from __future__ import annotations

import re
from functools import cache

from django.conf import settings

from core.amalgam import amalgamated
from core.scripts import script_dependencies

VERIFIER = settings.BASE_DIR / "verify" / "cairn_verify.py"


@cache
def verifier_built() -> str:
    """The one file, as `python3 -m core.amalgam verify/cairn_verify.py` builds it."""
    return amalgamated(VERIFIER)


@cache
def verifier_packages() -> tuple[str, ...]:
    """The packages the verifier's PEP 723 header names, without their versions: what the task
    page tells a person who runs it without `uv` to install."""
    return tuple(
        re.split(r"[<>=!~;\[ ]", item, maxsplit=1)[0]
        for item in script_dependencies(verifier_built())
    )
