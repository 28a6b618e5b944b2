"""The Agent Card's signature (SPEC §15.4), made and checked with the A2A SDK's own helpers.

A2A 1.0 signs the JCS form of the card without `signatures`; the protected header names the
algorithm, the key (`kid`) and where to fetch it (`jku`, the site's JWKS).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from a2a.types import AgentCard
from a2a.utils.signing import (
    ProtectedHeader,
    create_agent_card_signer,
    create_signature_verifier,
)
from django.conf import settings
from jwt import PyJWK
from jwt.exceptions import InvalidKeyError

from ledger.keys import ALGORITHM, site_kid

JWKS_PATH = "/.well-known/jwks.json"


def card_sign(card: AgentCard, *, site: str) -> AgentCard:
    header = ProtectedHeader(alg=ALGORITHM, kid=site_kid(), jku=f"{site}{JWKS_PATH}", typ="JOSE")
    return create_agent_card_signer(settings.CAIRN_SIGNING_KEY, header)(card)


def card_verifier(jwks: dict[str, Any]) -> Callable[[AgentCard], None]:
    """The SDK's verifier over the keys of `jwks`; it raises unless a signature verifies."""
    keys = {key.get("kid"): key for key in jwks.get("keys", [])}

    def key_for(kid: str | None, jku: str | None) -> PyJWK:
        if kid not in keys:
            raise InvalidKeyError(f"no key {kid!r} in the key set")  # the SDK tries the next one
        return PyJWK(keys[kid])

    return create_signature_verifier(key_for, algorithms=[ALGORITHM])
