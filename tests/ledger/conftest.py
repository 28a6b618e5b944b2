"""Fixtures for verifiability: a client that checks what Cairn signs with nothing but its JWKS."""

from __future__ import annotations

import importlib.util
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import httpx
import rfc8785
from joserfc import jws
from joserfc.errors import SecurityWarning
from joserfc.jwk import KeySet


def signed_payload(token: str, jwks: dict[str, Any]) -> dict[str, Any]:
    """The payload of a compact JWS, after checking its EdDSA signature with the published keys."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SecurityWarning)
        verified = jws.deserialize_compact(token, KeySet.import_key_set(jwks), algorithms=["EdDSA"])
    return json.loads(verified.payload)


def receipt_verified(receipt: dict[str, Any], http: httpx.Client) -> None:
    """Assert the receipt's signature covers exactly the JCS of the rest of the receipt."""
    claims = {key: value for key, value in receipt.items() if key != "signature"}
    token = receipt["signature"]
    payload = token.split(".")[1]
    assert payload, "the payload must be embedded, not detached"
    assert signed_payload(token, http.get("/.well-known/jwks.json").json()) == claims
    assert jws.extract_compact(token.encode()).payload == rfc8785.dumps(claims)


def load_verifier():
    """The offline verifier as a module, from the one file that is served."""
    path = Path(__file__).resolve().parents[2] / "verify" / "cairn_verify.py"
    spec = importlib.util.spec_from_file_location("cairn_verify", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["cairn_verify"] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module
