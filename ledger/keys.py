"""The site key (SPEC §15.1): one Ed25519 key signs receipts, checkpoints and the Agent Card.

Its public half is published as a JWKS whose `kid` is the RFC 7638 thumbprint, so a verifier can
pin it and any signature names the key it needs.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from django.conf import settings
from joserfc.jwk import OKPKey

# SPEC §15 and A2A name the algorithm `EdDSA` (RFC 8037); joserfc warns that RFC 9864 prefers
# the fully specified `Ed25519`. With an Ed25519-only key set the two mean the same thing.
ALGORITHM = "EdDSA"


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


def public_jwk() -> dict[str, Any]:
    return {**site_key().as_dict(private=False), "use": "sig", "alg": ALGORITHM, "kid": site_kid()}


def jwks() -> dict[str, Any]:
    return {"keys": [public_jwk()]}
