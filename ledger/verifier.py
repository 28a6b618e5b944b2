"""The offline verifier, served at `GET /verify/cairn_verify.py` with this site's URL as its default."""

from __future__ import annotations

import json
import re
from functools import cache

from django.conf import settings

VERIFIER = settings.BASE_DIR / "verify" / "cairn_verify.py"
_DEPENDENCIES = re.compile(r"^# dependencies = (\[.*\])$", re.MULTILINE)


@cache
def verifier_packages() -> tuple[str, ...]:
    """The packages the verifier's PEP 723 header names, without their versions: what a person
    who runs it without `uv` installs, so the header is the one place they are written."""
    found = _DEPENDENCIES.search(VERIFIER.read_text(encoding="utf-8"))
    if found is None:
        raise RuntimeError(f"{VERIFIER} names no dependencies in its PEP 723 header")
    return tuple(re.split(r"[<>=!~;\[ ]", item, maxsplit=1)[0] for item in json.loads(found[1]))
