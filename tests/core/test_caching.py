"""core/caching.py decides every answer's caching headers (SPEC §16.1); these tests hold its table,
the clock stopped so each deadline is a known number of seconds away. The doors' own tests
(tests/http, tests/a2a, tests/web) show the headers on the wire."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from core.caching import (
    IMMUTABLE,
    NO_STORE,
    PRIVATE,
    Shown,
    answer_caching,
    etag_of,
    if_none_match_hits,
)

BODY = b'{"id":"a task"}'
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def caching(
    shown: Shown | None,
    *,
    method: str = "GET",
    token: bool = False,
    if_none_match: str | None = None,
    status: int = 200,
):
    with time_machine.travel(NOW, tick=False):
        return answer_caching(
            method=method,
            token=token,
            if_none_match=if_none_match,
            status=status,
            shown=shown,
            body=lambda: BODY,
        )


def open_for(seconds: float) -> Shown:
    return Shown.task(NOW + timedelta(seconds=seconds))


def test_an_evaluated_task_is_kept_for_a_year_and_never_revalidated():
    answer = caching(Shown.task(None))
    assert answer is not None
    assert answer.cache_control == IMMUTABLE == "public, max-age=31536000, immutable"
    assert answer.etag == f'"{hashlib.sha256(BODY).hexdigest()}"'
    assert answer.vary == () and not answer.not_modified


@pytest.mark.parametrize(
    ("seconds_left", "cache_control"),
    [
        (3600, "public, max-age=5"),
        (6.9, "public, max-age=5"),
        (3.5, "public, max-age=2"),
        (2, "public, max-age=1"),
        (1.9, "no-cache"),
        (0.5, "no-cache"),
        (0, "no-cache"),
        # Past its deadline and still open: a task awaiting its keypers' releases.
        (-30, "no-cache"),
    ],
)
def test_an_open_task_is_kept_five_seconds_at_most_and_never_past_its_deadline(
    seconds_left, cache_control
):
    answer = caching(open_for(seconds_left))
    assert answer is not None and answer.cache_control == cache_control
    if cache_control != "no-cache":
        max_age = int(cache_control.rsplit("=", 1)[1])
        # The second a cache may round up (nginx counts whole seconds from its own receipt).
        assert max_age + 1 <= seconds_left


def test_a_list_is_kept_until_the_earliest_deadline_it_shows_open():
    assert caching(Shown.listing([None, None])).cache_control == "public, max-age=5"
    assert caching(Shown.listing([])).cache_control == "public, max-age=5"
    earliest = Shown.listing([None, NOW + timedelta(seconds=60), NOW + timedelta(seconds=3.2)])
    assert caching(earliest).cache_control == "public, max-age=2"
    overdue = Shown.listing([NOW + timedelta(seconds=60), NOW - timedelta(seconds=1)])
    assert caching(overdue).cache_control == "no-cache"


def test_a_schema_or_a_skill_is_kept_five_minutes():
    assert caching(Shown.document()).cache_control == "public, max-age=300"


def test_vary_names_the_headers_the_door_chose_by_not_the_token():
    answer = caching(Shown.task(None, vary=("A2A-Version",)))
    assert answer is not None and answer.vary == ("A2A-Version",)


@pytest.mark.parametrize("method", ["GET", "HEAD"])
@pytest.mark.parametrize("shown", [Shown.task(None), open_for(60), Shown.document()])
def test_a_public_read_is_cached_alike_with_a_token_or_without(method, shown):
    public = caching(shown, method=method, if_none_match=etag_of(BODY))
    assert caching(shown, method=method, token=True, if_none_match=etag_of(BODY)) == public
    assert public is not None and public.cache_control.startswith("public, max-age=")
    assert public.not_modified


@pytest.mark.parametrize("method", ["GET", "HEAD", "POST", "PUT", "DELETE"])
@pytest.mark.parametrize("status", [200, 201, 401, 404])
def test_an_answer_the_token_chose_is_private_and_not_stored(method, status):
    """`mine`, a write's receipt, a token's refusal: no view marks them public."""
    answer = caching(None, method=method, token=True, status=status, if_none_match=etag_of(BODY))
    assert answer is not None
    assert answer.cache_control == PRIVATE == "private, no-store"
    assert answer.vary == ("Authorization",)
    assert answer.etag is None and not answer.not_modified


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
def test_a_write_answer_is_no_store(method):
    answer = caching(None, method=method, status=201)
    assert answer is not None and answer.cache_control == NO_STORE


@pytest.mark.parametrize("status", [400, 404, 406, 429, 503])
def test_a_read_that_failed_is_no_store(status):
    answer = caching(Shown.task(None), status=status)
    assert answer is not None and answer.cache_control == NO_STORE and answer.etag is None


def test_an_answer_that_shows_nothing_described_is_left_as_its_view_made_it():
    assert caching(None) is None  # a log tile, a page of the admin
    assert caching(Shown.task(None), status=302) is None


@pytest.mark.parametrize(
    "header",
    [
        etag_of(BODY),
        "W/" + etag_of(BODY),
        f'"other", {etag_of(BODY)}',
        "*",
    ],
)
def test_if_none_match_holding_these_bytes_is_answered_304(header):
    answer = caching(Shown.task(None), if_none_match=header)
    assert answer is not None and answer.not_modified
    assert answer.etag == etag_of(BODY) and answer.cache_control == IMMUTABLE


@pytest.mark.parametrize("header", ['"other"', "", etag_of(BODY + b" ")])
def test_if_none_match_holding_other_bytes_is_answered_in_full(header):
    answer = caching(Shown.task(None), if_none_match=header)
    assert answer is not None and not answer.not_modified


def test_the_etag_is_strong_and_depends_only_on_the_bytes():
    assert etag_of(BODY) == etag_of(bytes(BODY)) and not etag_of(BODY).startswith("W/")
    assert etag_of(BODY) != etag_of(BODY + b"\n")
    assert if_none_match_hits(f"W/{etag_of(BODY)}", etag_of(BODY))


# Built a fraction of a second past the HTTP-date it is sent as.
BUILT = NOW - timedelta(hours=1) + timedelta(milliseconds=250)


def document_since(header: str | None, *, if_none_match: str | None = None):
    with time_machine.travel(NOW, tick=False):
        return answer_caching(
            method="GET",
            token=False,
            if_none_match=if_none_match,
            status=200,
            shown=Shown.document(etag='W/"card"', last_modified=BUILT),
            body=lambda: BODY,
            if_modified_since=header,
        )


def test_a_dated_document_carries_its_own_etag_and_last_modified():
    answer = document_since(None)
    assert answer is not None and not answer.not_modified
    assert answer.etag == 'W/"card"' and answer.cache_control == "public, max-age=300"
    assert answer.last_modified == "Fri, 01 May 2026 11:00:00 GMT"


@pytest.mark.parametrize(
    ("header", "not_modified"),
    [
        ("Fri, 01 May 2026 11:00:00 GMT", True),
        ("Fri, 01 May 2026 11:30:00 GMT", True),
        ("Fri, 01 May 2026 10:59:59 GMT", False),
        ("Friday, 01-May-26 11:00:00 GMT", True),
        ("not a date", False),
        ("", False),
    ],
)
def test_if_modified_since_is_answered_304_when_nothing_changed_after_it(header, not_modified):
    answer = document_since(header)
    assert answer is not None and answer.not_modified is not_modified


def test_if_none_match_decides_alone_when_sent():
    assert not document_since("Fri, 01 May 2026 11:30:00 GMT", if_none_match='"other"').not_modified
    assert document_since("Fri, 01 May 2026 10:00:00 GMT", if_none_match='W/"card"').not_modified
