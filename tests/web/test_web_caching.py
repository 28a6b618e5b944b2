"""What a cache may keep of the web door's answers (SPEC §16.1), over the live server: the task page,
the feed and the Atom feed with their ETags and 304s, the deadline bound, the skills and the texts
agents read, and the same with a token."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from calls.services import call_close, call_create
from tests.caching import (
    DOCUMENT,
    IMMUTABLE,
    NO_STORE,
    SHORT,
    cacheable,
    max_age_within,
    revalidated,
    same_with_a_token,
)
from tests.factories import contribution_report
from tests.web.conftest import PostedTask
from web.site_views import AGENT_TEXTS

# Far enough that the time left a page shows ("3 d 1 h") holds while a test asks twice.
DAYS = 3 * 86400 + 1800


@pytest.fixture
def evaluated(task_with) -> PostedTask:
    """A task posted two hours ago with two agreeing reports: past its deadline, so the first
    read evaluates it."""
    with time_machine.travel(timezone.now() - timedelta(hours=2), tick=False):
        return task_with(reports=(contribution_report(), contribution_report()))


def test_the_page_of_an_open_task_is_kept_for_seconds_and_revalidated(http, task_with):
    url = f"/a2a/tasks/{task_with(deadline_s=DAYS).id}"
    first = http.get(url)

    assert 'class="badge badge-open"' in first.text
    assert cacheable(first) == SHORT
    revalidated(http, url, first)


def test_the_page_of_an_evaluated_task_is_immutable(http, evaluated):
    url = f"/a2a/tasks/{evaluated.id}"
    first = http.get(url)

    assert 'class="badge badge-resolved"' in first.text
    assert cacheable(first) == IMMUTABLE
    revalidated(http, url, first)


@pytest.mark.parametrize("url", ["/a2a", "/a2a?mode=open", "/a2a?mode=evaluated", "/a2a/feed.atom"])
def test_the_feed_and_the_atom_feed_are_kept_for_seconds(http, task_with, evaluated, url):
    task_with(deadline_s=DAYS)
    http.get(f"/a2a/tasks/{evaluated.id}")  # evaluated by this read: the Atom feed lists it
    first = http.get(url)

    assert cacheable(first) == SHORT
    revalidated(http, url, first)


def test_no_page_is_kept_past_the_deadline_of_a_task_it_shows_open(http, task_with):
    task_with(deadline_s=60)
    soon = task_with(deadline_s=3.5)

    asked_at = timezone.now()
    page, feed = http.get(f"/a2a/tasks/{soon.id}"), http.get("/a2a?mode=open")

    assert 'class="badge badge-open"' in page.text and soon.task.title in feed.text
    for answer in (page, feed):
        cacheable(answer)
        max_age_within(answer, soon.task.deadline_text, asked_at)


@pytest.mark.parametrize("path", ["/a2a/calls", "/a2a/calls?mode=closed", "/a2a/calls/{id}"])
def test_the_calls_and_a_call_are_kept_for_seconds(http, poster, path):
    """A call may be answered or closed at any moment: its page and the list, like the feed."""
    call = call_create(title="Which source should Cairn read next?", body="Name one.", kind="other")
    if "closed" in path:
        call_close(call=call)
    url = path.format(id=call.id)
    first = http.get(url)

    assert call.title in first.text
    assert cacheable(first) == SHORT
    revalidated(http, url, first)
    same_with_a_token(http, url, first, poster.token)


@pytest.mark.parametrize("path", AGENT_TEXTS)
def test_the_skills_and_the_texts_agents_read_are_kept_for_minutes(http, path):
    first = http.get(f"/{path}")

    assert cacheable(first) == DOCUMENT
    assert first.headers["Access-Control-Allow-Origin"] == "*"
    revalidated(http, f"/{path}", first)


def test_a_page_asked_with_a_token_keeps_its_public_caching(http, poster, evaluated):
    for url in (
        f"/a2a/tasks/{evaluated.id}",
        "/a2a",
        "/a2a/feed.atom",
        "/skills/cairn-a2a/SKILL.md",
    ):
        public = http.get(url)
        cacheable(public)
        same_with_a_token(http, url, public, poster.token)


@pytest.mark.parametrize(
    "url",
    [
        "/a2a/tasks/00000000-0000-0000-0000-000000000000",
        "/a2a?mode=x",
        "/a2a/calls/00000000-0000-0000-0000-000000000000",
        "/a2a/calls?mode=x",
    ],
)
def test_a_page_that_failed_is_not_stored(http, url):
    answer = http.get(url)
    assert answer.status_code in (400, 404)
    assert answer.headers["Cache-Control"] == NO_STORE and "ETag" not in answer.headers
