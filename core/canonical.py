"""RFC 8785 (JCS) digests: what an agent previews is what the server checks, byte for byte."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import orjson
import rfc8785

# JCS writes every number as an IEEE double: an integer beyond this is not written exactly.
_MAX_EXACT_INT = 2**53 - 1


def _written_alike(value: Any) -> bool:
    """Whether orjson, keys sorted, writes `value` exactly as RFC 8785 does: for strings (both
    escape only `"`, `\\` and the C0 controls, with the same short forms and lower-case `\\u00xx`),
    booleans, null, integers a double holds exactly, and objects whose keys are ASCII (sorted alike
    by code point and by UTF-16 unit). A float needs ECMAScript's number formatting."""
    pending = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is int and -_MAX_EXACT_INT <= item <= _MAX_EXACT_INT:
            continue
        if kind is list:
            pending.extend(item)
        elif kind is dict:
            for key, member in item.items():
                if type(key) is not str or not key.isascii():
                    return False
                if type(member) is not str:  # most members: settled without a turn of the loop
                    pending.append(member)
        elif not isinstance(item, str):  # a str subclass (a TextChoices member) is its text
            return False
    return True


def canonical_json(value: Any) -> bytes:
    """JCS of `value`: orjson writes what every write canonicalises far faster than `rfc8785` (or
    `json.dumps`), and `rfc8785` still writes (and refuses) the rest."""
    if _written_alike(value):
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except TypeError:
            pass  # a lone surrogate: rfc8785 says what is wrong with it
    return rfc8785.dumps(value)


def canonical_digest(value: Any) -> str:
    """`"sha256:" + hex(SHA-256(JCS(value)))` — the digest every approval names."""
    return "sha256:" + hashlib.sha256(canonical_json(value)).hexdigest()


def fingerprint(value: Any) -> str:
    """A stable digest of any JSON value (even one JCS refuses, such as a huge integer),
    used to tell a replayed operation from a different one."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()
