"""What a cache sees of an answer (SPEC §16.1), asserted alike on every door: a public read's
headers and its 304, the same with a token, a token's own answer, a write's."""

from __future__ import annotations

import hashlib
import math
import re
from datetime import datetime

import httpx

from core.clock import parse_instant

IMMUTABLE = "public, max-age=31536000, immutable"
SHORT = "public, max-age=5"
DOCUMENT = "public, max-age=300"
PRIVATE = "private, no-store"
NO_STORE = "no-store"
_MAX_AGE = re.compile(r"public, max-age=([0-9]+)")


def vary_of(response: httpx.Response) -> set[str]:
    return {name.strip().lower() for name in response.headers.get("Vary", "").split(",") if name}


def cacheable(response: httpx.Response, *, vary: tuple[str, ...] = ()) -> str:
    """Assert a public read's answer: 200, a strong ETag from its bytes, no cookie, and a Vary
    naming exactly `vary` (not the token: the answer is the same with or without one); returns
    its Cache-Control."""
    assert response.status_code == 200, response.text
    assert response.headers["ETag"] == f'"{hashlib.sha256(response.content).hexdigest()}"'
    assert vary_of(response) == {name.lower() for name in vary}
    assert "Set-Cookie" not in response.headers
    return response.headers["Cache-Control"]


CACHING_HEADERS = ("ETag", "Cache-Control", "Vary", "Last-Modified")


def same_with_a_token(
    client: httpx.Client,
    url: str,
    first: httpx.Response,
    token: str,
    headers: dict[str, str] | None = None,
) -> None:
    """Assert a public read asked with a token (every A2A client may send one) is answered as
    `first` was without one: the same bytes and caching headers, and 304 on its ETag."""
    with_token = {**(headers or {}), "Authorization": f"Bearer {token}"}
    again = client.get(url, headers=with_token)
    assert again.status_code == 200, again.text
    assert again.content == first.content
    for name in CACHING_HEADERS:
        assert again.headers.get(name) == first.headers.get(name), name
    revalidated(client, url, first, with_token)


def revalidated(
    client: httpx.Client, url: str, first: httpx.Response, headers: dict[str, str] | None = None
) -> httpx.Response:
    """Ask again with the first answer's ETag, plain and weak: each time a 304 with no body and
    the first answer's ETag, Cache-Control and Vary."""
    etag = first.headers["ETag"]
    for tag in (etag, f'W/{etag.removeprefix("W/")}, "other"'):
        again = client.get(url, headers={**(headers or {}), "If-None-Match": tag})
        assert again.status_code == 304, again.text
        assert again.content == b""
        for name in CACHING_HEADERS:
            assert again.headers.get(name) == first.headers.get(name), name
    return again


def max_age_within(response: httpx.Response, deadline: str, asked_at: datetime) -> int:
    """Assert an answer showing a task open until `deadline` (SPEC time), asked at `asked_at`, may
    be kept at most five seconds and never past the deadline; returns the max-age (0 for
    `no-cache`)."""
    cache_control = response.headers["Cache-Control"]
    if cache_control == "no-cache":
        return 0
    found = _MAX_AGE.fullmatch(cache_control)
    assert found is not None, cache_control
    max_age = int(found.group(1))
    left = (parse_instant(deadline) - asked_at).total_seconds()
    assert 0 < max_age <= min(5, math.floor(left)), (cache_control, left)
    return max_age


def private(response: httpx.Response) -> None:
    """Assert an answer the request's token chose (`mine`, a write's receipt): kept by nobody,
    revalidated never."""
    assert response.headers["Cache-Control"] == PRIVATE, response.headers
    assert "authorization" in vary_of(response)
    assert "ETag" not in response.headers
