"""What a cache may keep of each answer, and for how long (SPEC §16.1): decided here, once, for
every door.

A public read says what its answer shows (`Shown`): one task, which never changes again once
evaluated and changes at its deadline while open; a list or a feed, which a new task may join at
any moment; a call or a list of calls, answered or posted at any moment; or a document that changes only with the code and the settings (a schema, a skill).
`answer_caching` turns that, the request's method, whether it carried a token and the answer's
status into the answer's `Cache-Control`, `Vary` and `ETag`, and says when the client's
`If-None-Match` already holds those bytes (304). Django's answers reach it through
`core.middleware.CachingMiddleware` (a view marks its answer with `mark_shown`), the A2A door's
own ASGI answers through its send; nothing else decides a caching header of these answers.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from django.utils import timezone

# An answer that never changes again: kept for a year, and never revalidated (RFC 8246).
IMMUTABLE = "public, max-age=31536000, immutable"
# The longest a cache may keep an open task or a list: a contribution or a new task shows within it.
SHORT_MAX_AGE_S = 5
# The schemas and the skills change only with the code and the settings, like the Agent Card,
# which A2A caches for five minutes (SPEC §8.1).
DOCUMENT_MAX_AGE_S = 300
# Kept, but asked again every time: an open task at (or a second from) its deadline.
REVALIDATE = "no-cache"
# A write's answer, a refusal, an outage: no cache keeps them.
NO_STORE = "no-store"
# The answer to a request that carried a token: its agent's own, kept by nobody.
PRIVATE = "private, no-store"
TOKEN_HEADER = "Authorization"
SAFE_METHODS = frozenset({"GET", "HEAD"})
# Where a Django view leaves what its answer shows, for `CachingMiddleware`.
_SHOWN_ATTRIBUTE = "cairn_shown"

Answer = TypeVar("Answer")


@dataclass(frozen=True)
class Shown:
    """What a public read's answer shows, as far as a cache goes: `final` (an evaluated task, the
    same bytes forever), else at most `max_age_s` seconds and never past `open_until`, the
    earliest deadline of a task it shows open; and the request headers besides the token that
    chose it (`vary`)."""

    final: bool = False
    open_until: datetime | None = None
    max_age_s: int = SHORT_MAX_AGE_S
    vary: tuple[str, ...] = ()

    @classmethod
    def task(cls, open_until: datetime | None, *, vary: tuple[str, ...] = ()) -> Shown:
        """One task: `open_until` is its deadline while it is open, None once it is evaluated."""
        return cls(final=open_until is None, open_until=open_until, vary=vary)

    @classmethod
    def listing(cls, open_until: Iterable[datetime | None], *, vary: tuple[str, ...] = ()) -> Shown:
        """A list or a feed of tasks, each given by its `open_until` (`Shown.task`)."""
        return cls(open_until=min(filter(None, open_until), default=None), vary=vary)

    @classmethod
    def changing(cls, *, vary: tuple[str, ...] = ()) -> Shown:
        """What may change at any moment but has no deadline: a call with its public answers, a
        list of calls."""
        return cls(vary=vary)

    @classmethod
    def document(cls, *, vary: tuple[str, ...] = ()) -> Shown:
        """A schema or a skill: it changes only with the code and the settings."""
        return cls(max_age_s=DOCUMENT_MAX_AGE_S, vary=vary)


def mark_shown(response: Answer, shown: Shown) -> Answer:
    """A Django view's public answer, marked with what it shows; `CachingMiddleware` reads it."""
    setattr(response, _SHOWN_ATTRIBUTE, shown)
    return response


def shown_by(response: Any) -> Shown | None:
    """What a Django view marked its answer as showing (`mark_shown`), or None."""
    shown: Shown | None = getattr(response, _SHOWN_ATTRIBUTE, None)
    return shown


def _freshness(shown: Shown, now: datetime) -> str:
    if shown.final:
        return IMMUTABLE
    max_age = shown.max_age_s
    if shown.open_until is not None:
        # A cache counts an answer's age from when it received it, in whole seconds (nginx by its
        # own clock, rounded down), so a max-age of every second left could keep the open task
        # up to a second past its deadline: one second less keeps every copy inside it.
        left = math.floor((shown.open_until - now).total_seconds()) - 1
        max_age = min(max_age, left)
    return f"public, max-age={max_age}" if max_age > 0 else REVALIDATE


def etag_of(body: bytes) -> str:
    """A strong ETag from the bytes alone: the same bytes get the same tag on every door."""
    return f'"{hashlib.sha256(body).hexdigest()}"'


def if_none_match_hits(header: str, etag: str) -> bool:
    """Whether an If-None-Match header selects this entity (RFC 9110 §13.1.2): `*`, or a tag
    equal under the weak comparison, where W/"x" and "x" are the same."""
    candidates = [candidate.strip() for candidate in header.split(",")]
    if "*" in candidates:
        return True
    return any(candidate.removeprefix("W/") == etag.removeprefix("W/") for candidate in candidates)


@dataclass(frozen=True)
class Caching:
    """An answer's caching headers: `Cache-Control` replaces the answer's own, `vary` joins its
    `Vary`, `etag` (when not None) is its `ETag`; `not_modified`: answer 304, without a body."""

    cache_control: str
    vary: tuple[str, ...] = ()
    etag: str | None = None
    not_modified: bool = False


def answer_caching(
    *,
    method: str,
    token: bool,
    if_none_match: str | None,
    status: int,
    shown: Shown | None,
    body: Callable[[], bytes],
) -> Caching | None:
    """The caching of one answer (SPEC §16.1), or None to leave it as its view made it (an answer
    that shows nothing `Shown` describes: the card, a log tile, a page of the admin, ...).

    `token`: the request carried an `Authorization` header; `shown`: what a public read's answer
    shows (only a 200 is marked); `body`: the answer's bytes, asked only to tag a public read.
    """
    if token:
        return Caching(PRIVATE, vary=(TOKEN_HEADER,))
    if method not in SAFE_METHODS or status >= 400:
        return Caching(NO_STORE)
    if shown is None or status != 200:
        return None
    etag = etag_of(body())
    return Caching(
        _freshness(shown, timezone.now()),
        vary=(*shown.vary, TOKEN_HEADER),
        etag=etag,
        not_modified=if_none_match is not None and if_none_match_hits(if_none_match, etag),
    )
