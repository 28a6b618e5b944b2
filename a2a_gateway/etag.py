"""The Agent Card's ETag and its revalidation (RFC 9110 §8.8.3, §13.1.2), as the SDK's card route
makes them, written here because the SDK keeps them private."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def card_etag(card: dict[str, Any]) -> str:
    """A weak ETag over the card without its `signatures`: two signings of the same card are the
    same entity, so a client holding either revalidates with 304."""
    unsigned = {key: value for key, value in card.items() if key != "signatures"}
    body = json.dumps(unsigned, sort_keys=True, separators=(",", ":"))
    return f'W/"{hashlib.sha256(body.encode("utf-8")).hexdigest()}"'


def if_none_match_hits(header: str, etag: str) -> bool:
    """Whether an If-None-Match header selects this entity: `*`, or a tag equal under the weak
    comparison, where W/"x" and "x" are the same."""
    candidates = [candidate.strip() for candidate in header.split(",")]
    if "*" in candidates:
        return True
    return any(candidate.removeprefix("W/") == etag.removeprefix("W/") for candidate in candidates)
