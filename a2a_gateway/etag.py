"""The Agent Card's ETag, as the SDK's card route makes it, written here because the SDK keeps it
private; its revalidation is every answer's (`core.caching`)."""

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
