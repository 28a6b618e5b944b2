"""RFC 8785 (JCS) digests: what an agent previews is what the server checks, byte for byte."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import rfc8785


def canonical_digest(value: Any) -> str:
    """`"sha256:" + hex(SHA-256(JCS(value)))` — the digest every approval names."""
    return "sha256:" + hashlib.sha256(rfc8785.dumps(value)).hexdigest()


def fingerprint(value: Any) -> str:
    """A stable digest of any JSON value (even one JCS refuses, such as a huge integer),
    used to tell a replayed operation from a different one."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()
