"""Signed receipts (SPEC §15.2): Cairn's signed promise that a sealed contribution will be in the
log within the maximum merge delay and in the evaluation."""

from __future__ import annotations

import warnings
from typing import Any

from joserfc import jws
from joserfc.errors import SecurityWarning

from core.canonical import canonical_json
from ledger.keys import ALGORITHM, site_key, site_kid


def receipt_sign(claims: dict[str, Any]) -> str:
    """A compact JWS with the claims embedded (`alg` EdDSA, `kid` the site key's thumbprint).
    Stored with the contribution though Ed25519 is deterministic: a replay must return the same
    bytes after the site key has been rotated too."""
    protected = {"alg": ALGORITHM, "kid": site_kid()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SecurityWarning)
        return jws.serialize_compact(
            protected, canonical_json(claims), site_key(), algorithms=[ALGORITHM]
        )
