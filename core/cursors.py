"""Keyset pages with opaque cursors: signed so a client cannot forge a position, bound to the
filter they came from, and as cheap a thousand pages deep as on the first."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, TypeVar

from django.core import signing
from django.db.models import Model, Q, QuerySet

from core.errors import ErrorCode, Refusal

_SALT = "cairn.cursor.v1"
# What `signing.dumps` writes (uncompressed): base64url JSON, the time in base 62 and a base64url
# HMAC-SHA256, joined by colons. Published to tell a cursor from a typo; only ours are taken.
CURSOR_FORM = r"[A-Za-z0-9_-]+:[0-9A-Za-z]+:[A-Za-z0-9_-]{43}"


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


def keyset_position(cursor: str, filter_key: str) -> tuple[datetime, uuid.UUID]:
    """The (time, id) a keyset cursor points after; refused like a tampered cursor otherwise."""
    position = cursor_decode(cursor, filter_key)
    try:
        return datetime.fromisoformat(position[0]), uuid.UUID(position[1])
    except (ValueError, TypeError, IndexError):
        raise Refusal(ErrorCode.INVALID_QUERY, "the cursor is not one this server issued") from None


def keyset_cursor(filter_key: str, at: datetime, pk: uuid.UUID) -> str:
    """The cursor of the page after the row at (`at`, `pk`); `keyset_position` reads it back."""
    return cursor_encode(filter_key, [at.astimezone(UTC).isoformat(), str(pk)])


M = TypeVar("M", bound=Model)


def keyset_page(
    rows: QuerySet[M], *, time_field: str, limit: int, cursor: str | None, filter_key: str
) -> tuple[list[M], str]:
    """One page of `rows`, newest `time_field` first, ties by id descending; returns the rows and
    the cursor of the next page ("" on the last). Rows must have a UUID primary key."""
    if cursor:
        after_time, after_id = keyset_position(cursor, filter_key)
        rows = rows.filter(
            Q(**{f"{time_field}__lt": after_time})
            | Q(**{time_field: after_time, "pk__lt": after_id})
        )
    page = list(rows.order_by(f"-{time_field}", "-pk")[: limit + 1])
    if len(page) <= limit:
        return page, ""
    last = page[limit - 1]
    return page[:limit], keyset_cursor(filter_key, getattr(last, time_field), last.pk)
