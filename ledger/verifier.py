"""The offline verifier, served at `GET /verify/cairn_verify.py` with this site's URL as its
default: `verify/cairn_verify.py` built into one file with the site's own modules (`core.amalgam`)."""

from __future__ import annotations

import json
import re
from functools import cache

from django.conf import settings

from core.amalgam import amalgamated

VERIFIER = settings.BASE_DIR / "verify" / "cairn_verify.py"
_DEPENDENCIES = re.compile(r"^# dependencies = (\[.*\])$", re.MULTILINE)


@cache
def verifier_built() -> str:
    """The one file, as `python3 -m core.amalgam verify/cairn_verify.py` builds it."""
    return amalgamated(VERIFIER)


@cache
def verifier_packages() -> tuple[str, ...]:
    """The packages the verifier's PEP 723 header names, without their versions: what a person
    who runs it without `uv` installs, so the header is the one place they are written."""
    found = _DEPENDENCIES.search(verifier_built())
    if found is None:
        raise RuntimeError(f"{VERIFIER} names no dependencies in its PEP 723 header")
    return tuple(re.split(r"[<>=!~;\[ ]", item, maxsplit=1)[0] for item in json.loads(found[1]))
