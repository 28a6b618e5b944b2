"""The site's checkpoints as C2SP signed notes. The key name is the origin, `<host>/cairn/log`, so
a verifier holding the site's public key can check a note without more.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings

from ledger.keys import site_private_key
from ledger.signed_note import (
    ED25519,
    VerifierKey,
    checkpoint_body_text,
    note_sign,
    private_verifier_key,
)


def site_host() -> str:
    parts = urlsplit(settings.CAIRN_SITE_URL or "http://localhost")
    host = parts.hostname or "localhost"
    if parts.port and parts.port != {"http": 80, "https": 443}.get(parts.scheme):
        host = f"{host}:{parts.port}"
    return host


def log_origin() -> str:
    """Log 0's origin, which also names the site to its keypers (SPEC §15.8)."""
    return f"{site_host()}/cairn/log"


def log_verifier_key(origin: str | None = None) -> VerifierKey:
    """The key a witness is configured with to follow this site's log (log 0 unless named)."""
    return private_verifier_key(origin or log_origin(), site_private_key(), type=ED25519)


def checkpoint_sign(tree_size: int, root: bytes, origin: str) -> str:
    body = checkpoint_body_text(origin, tree_size, root)
    return body + "\n" + note_sign(body, origin, site_private_key()).line
