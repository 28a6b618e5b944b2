"""Signed receipts (SPEC §15.2): Cairn's signed promise that a sealed contribution will be in the
log within the maximum merge delay and in the evaluation."""

from __future__ import annotations

from typing import Any

from core.canonical import canonical_json
from ledger.keys import sign_compact


def receipt_sign(claims: dict[str, Any]) -> str:
    """Stored with the contribution though Ed25519 is deterministic: a replay must return the same
    bytes after the site key has been rotated too."""
    return sign_compact(canonical_json(claims))
