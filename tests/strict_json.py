"""JSON compared as a client's strict reader sees it: `2` and `2.0` differ (an int and a double),
key order does not (protobuf's maps have none)."""

from __future__ import annotations

import json
from typing import Any


def strictly(value: str | bytes | Any) -> str:
    """One text per strictly typed JSON value: parsed when given as text, then written with
    sorted keys, where Python writes a float with its point and an int without."""
    parsed = json.loads(value) if isinstance(value, str | bytes) else value
    return json.dumps(parsed, sort_keys=True, ensure_ascii=False)
