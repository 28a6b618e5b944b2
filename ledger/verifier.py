"""`GET /verify/cairn_verify.py`: the offline verifier, with this site's URL as its default."""

from __future__ import annotations

import json
import re
from functools import cache

from django.conf import settings

VERIFIER = settings.BASE_DIR / "verify" / "cairn_verify.py"
_DEFAULT_URL_LINE = re.compile(r'^DEFAULT_CAIRN_URL = "[^"\n]*"$', re.MULTILINE)


@cache
def _source() -> str:
    source = VERIFIER.read_text(encoding="utf-8")
    if len(_DEFAULT_URL_LINE.findall(source)) != 1:
        raise RuntimeError(f"{VERIFIER} must set DEFAULT_CAIRN_URL on exactly one line")
    return source


def verifier_source(url: str) -> str:
    line = f"DEFAULT_CAIRN_URL = {json.dumps(url.rstrip('/'))}"
    return _DEFAULT_URL_LINE.sub(lambda _match: line, _source())
