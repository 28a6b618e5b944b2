"""Opaque page cursors: signed so a client cannot forge a position, bound to the filter they came from."""

from __future__ import annotations

from typing import Any

from django.core import signing

from cairn.errors import ErrorCode, Refusal

_SALT = "cairn.cursor.v1"


def cursor_encode(filter_key: str, position: list[Any]) -> str:
    return signing.dumps([filter_key, position], salt=_SALT, compress=False)


def cursor_decode(token: str, filter_key: str) -> list[Any]:
    """The position a cursor holds; refused when tampered with or made for another filter."""
    try:
        bound_to, position = signing.loads(token, salt=_SALT)
    except (signing.BadSignature, ValueError, TypeError):
        raise Refusal(ErrorCode.INVALID_QUERY, "the cursor is not one this server issued") from None
    if bound_to != filter_key:
        raise Refusal(ErrorCode.INVALID_QUERY, "the cursor belongs to another filter")
    return position
