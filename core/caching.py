"""What a cache may keep of each answer, and for how long (SPEC §16.1), decided once for every
door from what a public read says its answer shows (`Shown`). A public read is cached alike with or
without a token, which A2A clients may send with every request: only what the token chose is
private."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

from django.utils import timezone
from django.utils.http import http_date

# An answer that never changes again: kept for a year, and never revalidated (RFC 8246).
IMMUTABLE = "public, max-age=31536000, immutable"
# The longest a cache may keep an open task or a list: a contribution or a new task shows within it.
SHORT_MAX_AGE_S = 5
# As long as A2A caches the Agent Card (SPEC §8.1), for every document (`Shown.document`).
DOCUMENT_MAX_AGE_S = 300
# Kept, but asked again every time: an open task at (or a second from) its deadline.
REVALIDATE = "no-cache"
# A write's answer, a refusal, an outage: no cache keeps them.
NO_STORE = "no-store"
# An answer the request's token chose: its agent's own, kept by nobody.
PRIVATE = "private, no-store"
TOKEN_HEADER = "Authorization"
SAFE_METHODS = frozenset({"GET", "HEAD"})
SHOWN_ATTRIBUTE = "cairn_shown"

Answer = TypeVar("Answer")


@dataclass(frozen=True)
class Shown:
    """What a public read's answer shows, as far as a cache goes: `final` (the same bytes forever),
    else at most `max_age_s` seconds and never past `open_until`, the earliest deadline of a task
    it shows open; `vary`: the request headers that chose it."""

    final: bool = False
    open_until: datetime | None = None
    max_age_s: int = SHORT_MAX_AGE_S
    vary: tuple[str, ...] = ()
    etag: str | None = None
    last_modified: datetime | None = None

    @classmethod
    def task(cls, open_until: datetime | None, *, vary: tuple[str, ...] = ()) -> Shown:
        """One task: `open_until` is its deadline while it is open, None once it is evaluated."""
        return cls(final=open_until is None, open_until=open_until, vary=vary)

    @classmethod
    def listing(cls, open_until: Iterable[datetime | None], *, vary: tuple[str, ...] = ()) -> Shown:
        """A list or a feed of tasks, each given by its `open_until` (`Shown.task`)."""
        return cls(open_until=min(filter(None, open_until), default=None), vary=vary)

    @classmethod
    def document(cls, *, etag: str | None = None, last_modified: datetime | None = None) -> Shown:
        """A schema, a skill or the Agent Card: it changes only with the code and the settings."""
        return cls(max_age_s=DOCUMENT_MAX_AGE_S, etag=etag, last_modified=last_modified)


def mark_shown(response: Answer, shown: Shown) -> Answer:
    """A Django view's public answer, marked with what it shows; `CachingMiddleware` reads it."""
    setattr(response, SHOWN_ATTRIBUTE, shown)
    return response


def _freshness(shown: Shown) -> str:
    if shown.final:
        return IMMUTABLE
    max_age = shown.max_age_s
    if shown.open_until is not None:
        # A cache counts an answer's age from when it received it, in whole seconds (nginx by its
        # own clock, rounded down), so a max-age of every second left could keep the open task
        # up to a second past its deadline: one second less keeps every copy inside it.
        left = math.floor((shown.open_until - timezone.now()).total_seconds()) - 1
        max_age = min(max_age, left)
    return f"public, max-age={max_age}" if max_age > 0 else REVALIDATE


def etag_of(body: bytes) -> str:
    """A strong ETag from the bytes alone: the same bytes get the same tag on every door."""
    return f'"{hashlib.sha256(body).hexdigest()}"'


def if_none_match_hits(header: str, etag: str) -> bool:
    """Whether an If-None-Match header selects this entity (RFC 9110 §13.1.2): `*`, or a tag
    equal under the weak comparison, where W/"x" and "x" are the same."""
    tags = [tag.strip() for tag in header.split(",")]
    return "*" in tags or any(tag.removeprefix("W/") == etag.removeprefix("W/") for tag in tags)


def _not_modified(
    shown: Shown, etag: str, if_none_match: str | None, if_modified_since: str | None
) -> bool:
    """RFC 9110 §13.2.2: If-None-Match when sent, else If-Modified-Since, whose date must be an
    HTTP-date to count (§13.1.3): otherwise the answer is given in full."""
    if if_none_match is not None:
        return if_none_match_hits(if_none_match, etag)
    if if_modified_since is None or shown.last_modified is None:
        return False
    try:
        since = parsedate_to_datetime(if_modified_since)
    except (TypeError, ValueError):
        return False
    return since.tzinfo is not None and shown.last_modified.replace(microsecond=0) <= since


@dataclass(frozen=True)
class Caching:
    """An answer's caching headers; `not_modified`: answer 304, without a body."""

    cache_control: str
    vary: tuple[str, ...] = ()
    etag: str | None = None
    last_modified: str | None = None
    not_modified: bool = False


def answer_caching(
    *,
    method: str,
    token: bool,
    if_none_match: str | None,
    status: int,
    shown: Shown | None,
    body: Callable[[], bytes],
    if_modified_since: str | None = None,
) -> Caching | None:
    """The caching of one answer, or None to leave it as its view made it (a log tile, an admin
    page). `body` is asked only to tag a public read."""
    if method in SAFE_METHODS and status == 200 and shown is not None:
        etag = shown.etag or etag_of(body())
        return Caching(
            _freshness(shown),
            vary=shown.vary,
            etag=etag,
            last_modified=(
                None if shown.last_modified is None else http_date(shown.last_modified.timestamp())
            ),
            not_modified=_not_modified(shown, etag, if_none_match, if_modified_since),
        )
    if token:
        return Caching(PRIVATE, vary=(TOKEN_HEADER,))
    if method not in SAFE_METHODS or status >= 400:
        return Caching(NO_STORE)
    return None
