"""What a cache may keep of the plain HTTP routes' answers (SPEC §16.1), over the live server: one
task and the lists with their ETags and 304s, the deadline bound, a write's and a token's answers,
the schemas."""

from __future__ import annotations

import pytest
from django.utils import timezone

from calls.published_schemas import PUBLISHED_SCHEMAS, SCHEMA_PATH
from tests.caching import (
    DOCUMENT,
    IMMUTABLE,
    NO_STORE,
    SHORT,
    cacheable,
    max_age_within,
    private,
    revalidated,
    same_with_a_token,
)
from tests.factories import contribution_payload, deadline_in, open_task_payload, open_task_request
from tests.http.conftest import bearer

# DRF chooses the answer's form by the request's Accept.
VARY = ("Accept",)


def test_an_open_task_is_kept_for_seconds_and_revalidated_by_its_etag(api, poster, post_task):
    url = f"/api/a2a-tasks/{post_task(poster).id}"
    first = api.get(url)

    assert first.json()["state"] == "open"
    assert cacheable(first, vary=VARY) == SHORT
    revalidated(api, url, first)


def test_an_evaluated_task_is_immutable(api, evaluated_id):
    url = f"/api/a2a-tasks/{evaluated_id}"
    first = api.get(url)

    assert first.json()["state"] == "evaluated"
    assert cacheable(first, vary=VARY) == IMMUTABLE
    revalidated(api, url, first)
    head = api.head(url)
    assert head.status_code == 200 and head.content == b""
    assert head.headers["ETag"] == first.headers["ETag"]
    assert head.headers["Cache-Control"] == IMMUTABLE


@pytest.mark.parametrize("query", ["", "?mode=evaluated", "?mode=open&limit=1"])
def test_a_list_is_kept_for_seconds(api, poster, post_task, evaluated_id, query):
    post_task(poster)
    url = f"/api/a2a-tasks{query}"
    first = api.get(url)

    assert first.json()["tasks"]
    assert cacheable(first, vary=VARY) == SHORT
    revalidated(api, url, first)


def test_no_answer_is_kept_past_the_deadline_of_a_task_it_shows_open(
    api, poster, make_agent, post_task, short_deadlines
):
    later = post_task(make_agent(), open_task_payload(open_task_request(deadline=deadline_in(60))))
    soon = post_task(poster, open_task_payload(open_task_request(deadline=deadline_in(3.5))))
    deadline = soon.deadline_text

    asked_at = timezone.now()
    one, listed = api.get(f"/api/a2a-tasks/{soon.id}"), api.get("/api/a2a-tasks?mode=open")

    assert one.json()["state"] == "open"
    assert [task["id"] for task in listed.json()["tasks"]] == [str(soon.id), str(later.id)]
    for answer in (one, listed):
        cacheable(answer, vary=VARY)
        max_age_within(answer, deadline, asked_at)


def test_a_write_answer_is_not_stored(api, poster, make_agent, post_task):
    task = post_task(poster)
    refused = api.post("/api/a2a-tasks", json=open_task_payload())
    assert refused.status_code == 401 and refused.headers["Cache-Control"] == NO_STORE

    for url, payload in [
        ("/api/a2a-tasks", open_task_payload()),
        (f"/api/a2a-tasks/{task.id}/contributions", contribution_payload()),
    ]:
        written = api.post(url, json=payload, headers=bearer(make_agent().token))
        assert written.status_code == 201, written.text
        private(written)


def test_a_public_read_with_a_token_keeps_its_public_caching(api, poster, post_task, evaluated_id):
    for url in (
        f"/api/a2a-tasks/{evaluated_id}",
        f"/api/a2a-tasks/{post_task(poster).id}",
        "/api/a2a-tasks",
        SCHEMA_PATH,
    ):
        public = api.get(url)
        cacheable(public, vary=() if url == SCHEMA_PATH else VARY)
        same_with_a_token(api, url, public, poster.token)
        # A token nobody issued is the same as none.
        same_with_a_token(api, url, public, "cairn_not-a-token")


def test_what_the_token_chose_is_private(api, poster, post_task):
    post_task(poster)
    mine = api.get("/api/a2a-tasks/mine", headers=bearer(poster.token))
    assert mine.status_code == 200 and mine.json()["tasks"]
    private(mine)
    refused = api.get("/api/a2a-tasks/mine", headers=bearer("cairn_not-a-token"))
    assert refused.status_code == 401
    private(refused)


@pytest.mark.parametrize("path", ["", "?mode=open", "?mode=all&limit=1", "/{id}"])
def test_the_calls_and_a_call_are_kept_for_seconds(api, make_call, poster, path):
    """A call may be answered or closed at any moment: the list and the call, like a task list."""
    call = make_call()
    url = "/api/a2a-calls" + path.format(id=call.id)
    first = api.get(url)

    assert call.title in first.text
    assert cacheable(first, vary=VARY) == SHORT
    revalidated(api, url, first)
    same_with_a_token(api, url, first, poster.token)


@pytest.mark.parametrize(
    ("url", "headers", "status"),
    [
        ("/api/a2a-tasks/00000000-0000-0000-0000-000000000000", {}, 404),
        ("/api/a2a-tasks?mode=later", {}, 400),
        ("/api/a2a-tasks", {"Accept": "text/html"}, 406),
        ("/api/a2a-calls/00000000-0000-0000-0000-000000000000", {}, 404),
        ("/api/a2a-calls?mode=later", {}, 400),
    ],
)
def test_a_read_that_failed_is_not_stored(api, url, headers, status):
    answer = api.get(url, headers=headers)
    assert answer.status_code == status
    assert answer.headers["Cache-Control"] == NO_STORE and "ETag" not in answer.headers


@pytest.mark.parametrize(
    "url",
    [
        SCHEMA_PATH,
        *(SCHEMA_PATH + name for name in PUBLISHED_SCHEMAS),
        "/api/openapi.json",
        "/.well-known/jwks.json",
        "/api/log/vkey",
    ],
)
def test_the_schemas_and_the_site_keys_are_kept_for_minutes(api, poster, url):
    first = api.get(url)

    assert cacheable(first) == DOCUMENT
    revalidated(api, url, first)
    same_with_a_token(api, url, first, poster.token)
