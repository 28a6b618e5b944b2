"""What a cache may keep of the A2A door's answers (SPEC §16.1), on both of its adapters (the ASGI
app and the Django view): the HTTP+JSON GetTask and ListTasks with their ETags and 304s, the
deadline bound, the same reads with a token, a write's answer, JSON-RPC, whose reads are POSTs, and
the Agent Card."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime

import httpx
import pytest
from django.utils import timezone

from tests.a2a.conftest import message, result_of
from tests.a2a.test_rest import ok, rest
from tests.caching import (
    IMMUTABLE,
    NO_STORE,
    SHORT,
    cacheable,
    max_age_within,
    private,
    revalidated,
    same_with_a_token,
)
from tests.factories import deadline_in, open_task_payload, open_task_request

# What the binding answers depends on the version the request names (another gets an error).
VARY = ("A2A-Version",)
VERSION = {"A2A-Version": "1.0"}


def test_get_task_of_an_open_task_is_kept_for_seconds_and_revalidated(http, poster, post_task):
    url = f"/api/a2a/tasks/{post_task(poster).id}"
    first = http.get(url, headers=VERSION)

    assert ok(first)["status"]["state"] == "TASK_STATE_WORKING"
    assert cacheable(first, vary=VARY) == SHORT
    revalidated(http, url, first, VERSION)


def test_get_task_of_an_evaluated_task_is_immutable(http, evaluated_id):
    url = f"/api/a2a/tasks/{evaluated_id}"
    first = http.get(url, headers=VERSION)

    assert ok(first)["status"]["state"] == "TASK_STATE_COMPLETED"
    assert cacheable(first, vary=VARY) == IMMUTABLE
    revalidated(http, url, first, VERSION)
    head = http.head(url, headers=VERSION)
    assert head.status_code == 200 and head.content == b""
    assert head.headers["ETag"] == first.headers["ETag"]
    assert head.headers["Cache-Control"] == IMMUTABLE


@pytest.mark.parametrize(
    "query",
    ["", "?status=TASK_STATE_COMPLETED", "?status=working&pageSize=1&includeArtifacts=true"],
)
def test_list_tasks_is_kept_for_seconds(http, poster, post_task, evaluated_id, query):
    post_task(poster)
    url = f"/api/a2a/tasks{query}"
    first = http.get(url, headers=VERSION)

    assert ok(first)["tasks"]
    assert cacheable(first, vary=VARY) == SHORT
    revalidated(http, url, first, VERSION)


def test_no_answer_is_kept_past_the_deadline_of_a_task_it_shows_open(
    http, poster, make_agent, post_task, short_deadlines
):
    post_task(make_agent(), open_task_payload(open_task_request(deadline=deadline_in(60))))
    soon = post_task(poster, open_task_payload(open_task_request(deadline=deadline_in(3.5))))

    asked_at = timezone.now()
    one = http.get(f"/api/a2a/tasks/{soon.id}", headers=VERSION)
    listed = http.get("/api/a2a/tasks?status=working", headers=VERSION)

    assert ok(one)["status"]["state"] == "TASK_STATE_WORKING"
    assert ok(listed)["tasks"][0]["id"] == str(soon.id)
    for answer in (one, listed):
        cacheable(answer, vary=VARY)
        max_age_within(answer, soon.deadline_text, asked_at)


def test_every_adapter_answers_the_same_etag_for_the_same_bytes(
    _cairn_server, _cairn_wsgi_server, transactional_db, settings, evaluated_id
):
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "127.0.0.1"]
    answers = [
        httpx.get(f"http://127.0.0.1:{server.port}/api/a2a/tasks/{evaluated_id}", headers=VERSION)
        for server in (_cairn_server, _cairn_wsgi_server)
    ]
    assert answers[0].content == answers[1].content
    assert answers[0].headers["ETag"] == answers[1].headers["ETag"]
    assert all(cacheable(answer, vary=VARY) == IMMUTABLE for answer in answers)


def test_a_read_with_a_token_keeps_its_public_caching(http, poster, post_task, evaluated_id):
    for url in (
        f"/api/a2a/tasks/{post_task(poster).id}",
        f"/api/a2a/tasks/{evaluated_id}",
        "/api/a2a/tasks",
    ):
        public = http.get(url, headers=VERSION)
        cacheable(public, vary=VARY)
        same_with_a_token(http, url, public, poster.token, VERSION)
        same_with_a_token(http, url, public, "cairn_not-a-token", VERSION)


def test_a_write_with_a_token_is_private(http, make_agent):
    sent = rest(
        http,
        "POST",
        "/message:send",
        body={"message": message(open_task_payload())},
        token=make_agent().token,
    )
    assert ok(sent)["task"]["status"]["state"] == "TASK_STATE_WORKING"
    private(sent)


def test_a_write_without_a_token_is_not_stored(http):
    refused = rest(http, "POST", "/message:send", body={"message": message(open_task_payload())})
    assert refused.status_code == 401 and refused.headers["Cache-Control"] == NO_STORE


@pytest.mark.parametrize(
    ("path", "headers", "status"),
    [
        ("/api/a2a/tasks/00000000-0000-0000-0000-000000000000", VERSION, 404),
        ("/api/a2a/tasks", {}, 400),  # no A2A-Version
        ("/api/a2a/tasks?status=later", VERSION, 400),
    ],
)
def test_a_read_that_failed_is_not_stored(http, path, headers, status):
    answer = http.get(path, headers=headers)
    assert answer.status_code == status, answer.text
    assert answer.headers["Cache-Control"] == NO_STORE and "ETag" not in answer.headers


def test_json_rpc_reads_are_posts_and_not_stored(rpc, poster, post_task, evaluated_id):
    task = post_task(poster)
    for method, params in [
        ("GetTask", {"id": evaluated_id}),
        ("GetTask", {"id": str(task.id)}),
        ("ListTasks", {}),
    ]:
        answer = rpc(method, params)
        assert result_of(answer)
        assert answer.headers["Cache-Control"] == NO_STORE and "ETag" not in answer.headers
        private(rpc(method, params, token=poster.token))


@pytest.mark.parametrize("token", ["none", "unknown", "issued"])
def test_the_card_is_public_with_a_token_or_without(http, poster, token):
    """A2A 1.0 §8.6.1 and the TCK's CARD-CACHE-001: a client may send its token when it fetches
    the card, which still comes with a max-age, its ETag and its Last-Modified."""
    sent = {"none": None, "unknown": "cairn_not-a-token", "issued": poster.token}[token]
    headers = {} if sent is None else {"Authorization": f"Bearer {sent}"}
    card = http.get("/.well-known/agent-card.json", headers=headers)
    assert card.status_code == 200
    assert card.headers["Cache-Control"] == "public, max-age=300"
    assert card.headers["ETag"].startswith('W/"')
    assert "Vary" not in card.headers and "Set-Cookie" not in card.headers
    assert parsedate_to_datetime(card.headers["Last-Modified"]) <= datetime.now(UTC)
    revalidated(http, "/.well-known/agent-card.json", card, headers)


def test_the_card_answers_if_modified_since(http):
    url = "/.well-known/agent-card.json"
    card = http.get(url)
    last_modified = card.headers["Last-Modified"]
    built = parsedate_to_datetime(last_modified)

    def since(moment: datetime, **extra: str) -> httpx.Response:
        since = format_datetime(moment.astimezone(UTC), usegmt=True)
        return http.get(url, headers={"If-Modified-Since": since, **extra})

    held = since(built)
    assert held.status_code == 304 and held.content == b""
    assert held.headers["Last-Modified"] == last_modified
    assert held.headers["ETag"] == card.headers["ETag"]
    assert since(built + timedelta(days=1)).status_code == 304
    older = since(built - timedelta(seconds=1))
    assert older.status_code == 200 and older.content == card.content
    # If-None-Match, when sent, decides alone (RFC 9110 §13.2.2).
    assert since(built, **{"If-None-Match": '"other"'}).status_code == 200
    assert http.get(url, headers={"If-Modified-Since": "yesterday"}).status_code == 200
