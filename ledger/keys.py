"""The site key (SPEC §15.1): one Ed25519 key signs receipts (§15.2), checkpoints and the Agent
Card (with the A2A SDK's own helpers). Its JWKS `kid` is the RFC 7638 thumbprint, so a verifier can
pin the key and every signature names the one it needs."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from a2a.types import AgentCard
from a2a.utils.signing import (
    ProtectedHeader,
    create_agent_card_signer,
    create_signature_verifier,
)
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from django.conf import settings
from joserfc import jws
from joserfc.errors import SecurityWarning
from joserfc.jwk import OKPKey
from jwt import PyJWK
from jwt.exceptions import InvalidKeyError

from core.canonical import canonical_json

# SPEC §15 and A2A name the algorithm `EdDSA` (RFC 8037); joserfc warns that RFC 9864 prefers
# the fully specified `Ed25519`. With an Ed25519-only key set the two mean the same thing.
ALGORITHM = "EdDSA"
JWKS_PATH = "/.well-known/jwks.json"


@lru_cache(maxsize=4)
def _key(pem: str) -> OKPKey:
    return OKPKey.import_key(pem)


def site_key() -> OKPKey:
    return _key(settings.CAIRN_SIGNING_KEY)


@lru_cache(maxsize=8)
def _pem_loaded(pem: str) -> PrivateKeyTypes:
    return serialization.load_pem_private_key(pem.encode(), password=None)


def configured_private_key(setting: str, kind: type) -> Any:
    """Parsed once; settings already refused any other kind, so another is a bug."""
    key = _pem_loaded(getattr(settings, setting))
    if not isinstance(key, kind):
        raise TypeError(f"{setting} is not an {kind.__name__}")
    return key


def site_private_key() -> ed25519.Ed25519PrivateKey:
    return configured_private_key("CAIRN_SIGNING_KEY", ed25519.Ed25519PrivateKey)


@lru_cache(maxsize=4)
def _kid(pem: str) -> str:
    return _key(pem).thumbprint()


def site_kid() -> str:
    return _kid(settings.CAIRN_SIGNING_KEY)


def jwks() -> dict[str, Any]:
    public = site_key().as_dict(private=False)
    return {"keys": [{**public, "use": "sig", "alg": ALGORITHM, "kid": site_kid()}]}


def receipt_sign(claims: dict[str, Any]) -> str:
    """A compact JWS, stored with the contribution though Ed25519 is deterministic: a replay must
    return the same bytes after the site key has been rotated too."""
    protected = {"alg": ALGORITHM, "kid": site_kid()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SecurityWarning)
        return jws.serialize_compact(
            protected, canonical_json(claims), site_key(), algorithms=[ALGORITHM]
        )


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
