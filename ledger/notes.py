"""Checkpoints as C2SP signed notes (`tlog-checkpoint`, `signed-note`), signed with the site key.

    <origin>\n<tree size>\n<base64 root hash>\n
    \n
    — <key name> <base64(key hash ‖ Ed25519 signature)>\n

The key hash is the first four bytes of SHA-256(key name ‖ "\n" ‖ 0x01 ‖ public key); the key
name is the origin, so a verifier holding the site's public key can check a note without more.
"""

from __future__ import annotations

import base64
import hashlib
from urllib.parse import urlsplit

from cryptography.hazmat.primitives import serialization
from django.conf import settings

from ledger.keys import site_private_key

ED25519_TYPE = b"\x01"
DEFAULT_PORTS = {"http": 80, "https": 443}


def log_origin() -> str:
    """`<host>/cairn/log`, the host of `CAIRN_SITE_URL` with its port unless it is the default."""
    parts = urlsplit(settings.CAIRN_SITE_URL or "http://localhost")
    host = parts.hostname or "localhost"
    if parts.port and parts.port != DEFAULT_PORTS.get(parts.scheme):
        host = f"{host}:{parts.port}"
    return f"{host}/cairn/log"


def key_hash(name: str, public_key: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + ED25519_TYPE + public_key).digest()[:4]


def checkpoint_body(origin: str, tree_size: int, root: bytes) -> str:
    return f"{origin}\n{tree_size}\n{base64.b64encode(root).decode()}\n"


def checkpoint_sign(tree_size: int, root: bytes) -> str:
    """The signed note for a tree of `tree_size` leaves whose root hash is `root`."""
    origin = log_origin()
    body = checkpoint_body(origin, tree_size, root)
    private = site_private_key()
    public = private.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    signature = private.sign(body.encode())
    stamp = base64.b64encode(key_hash(origin, public) + signature).decode()
    return f"{body}\n\u2014 {origin} {stamp}\n"
