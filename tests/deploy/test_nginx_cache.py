"""SPEC §16.1, nginx as the cache: the nginx block of docs/deployment.md, run as printed with only
its placeholders replaced, in front of `python -m cairn.serve`, which is stopped and started again
while nginx runs.

- An evaluated task is served from the cache on each of its doors with Cairn stopped.
- An open task is never served past its deadline: read on every door, again and again across
  its deadline, each answer to a request sent after the deadline shows it evaluated, while
  before the deadline the cache did answer with it open.
- A token never reaches a cached answer: a request with one is not answered from the cache (with
  Cairn stopped it gets nginx's 502), and what Cairn answers it is not stored.

`X-Cache-Status` is the printed block's own header: how nginx answered.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from core.clock import parse_instant
from tests.deploy.test_nginx import CLIENT_ADDRESS, SERVER_NAME, Proxied, behind_nginx
from tests.factories import deadline_in, open_task_payload, open_task_request

VERSION = {"A2A-Version": "1.0"}
IMMUTABLE = "public, max-age=31536000, immutable"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Iterator[Proxied]:
    with behind_nginx(
        tmp_path_factory.mktemp("nginx-cache"),
        CAIRN_TASK_DEADLINE_MIN_S="1",
        CAIRN_REGISTRATIONS_PER_IP_PER_HOUR="100",
    ) as proxied:
        yield proxied


@pytest.fixture
def client(site: Proxied) -> Iterator[httpx.Client]:
    """A client on its own address, talking https to nginx under the site's name."""
    with httpx.Client(
        transport=httpx.HTTPTransport(verify=False, local_address=CLIENT_ADDRESS),
        base_url=f"https://127.0.0.1:{site.https_port}",
        headers={"Host": f"{SERVER_NAME}:{site.https_port}"},
        timeout=20,
    ) as opened:
        yield opened


def token_of(client: httpx.Client) -> str:
    registered = client.post("/api/agent/register", json={})
    assert registered.status_code == 201, registered.text
    return str(registered.json()["token"])


@dataclass(frozen=True)
class Posted:
    id: str
    deadline: datetime


def post_task(client: httpx.Client, deadline_s: float) -> Posted:
    payload = open_task_payload(open_task_request(deadline=deadline_in(deadline_s)))
    answer = client.post(
        "/api/a2a-tasks", json=payload, headers={"Authorization": f"Bearer {token_of(client)}"}
    )
    assert answer.status_code == 201, answer.text
    assert answer.headers["Cache-Control"] == "private, no-store"
    view = answer.json()["task"]
    return Posted(view["id"], parse_instant(view["deadline"]))


def wait_past(deadline: datetime) -> None:
    time.sleep(max(0.0, (deadline - datetime.now(UTC)).total_seconds()) + 0.05)


# Where a task is read, and the state each answer shows it in ("open" or "evaluated").
def _a2a_state(task: dict[str, Any]) -> str:
    return "open" if task["status"]["state"] == "TASK_STATE_WORKING" else "evaluated"


def _listed(tasks: list[dict[str, Any]], task_id: str, state: Callable[[Any], str]) -> str:
    (found,) = [task for task in tasks if task["id"] == task_id]
    return state(found)


def _page_state(text: str) -> str:
    return "open" if 'class="badge badge-open"' in text else "evaluated"


def _feed_state(text: str, task_id: str) -> str:
    """The state the feed's card of this task shows."""
    card = text.split(f'aria-labelledby="task-{task_id}"', 1)[1].split("</article>", 1)[0]
    return _page_state(card)


Door = tuple[str, dict[str, str], Callable[[httpx.Response, str], str]]
TASK_DOORS: list[Door] = [
    ("/api/a2a/tasks/{id}", VERSION, lambda answer, _: _a2a_state(answer.json())),
    ("/api/a2a-tasks/{id}", {}, lambda answer, _: answer.json()["state"]),
    ("/a2a/tasks/{id}", {}, lambda answer, _: _page_state(answer.text)),
]
LIST_DOORS: list[Door] = [
    (
        "/api/a2a/tasks",
        VERSION,
        lambda answer, task_id: _listed(answer.json()["tasks"], task_id, _a2a_state),
    ),
    (
        "/api/a2a-tasks",
        {},
        lambda answer, task_id: _listed(answer.json()["tasks"], task_id, lambda t: t["state"]),
    ),
    ("/a2a", {}, lambda answer, task_id: _feed_state(answer.text, task_id)),
]


def test_an_evaluated_task_is_served_from_the_cache_with_cairn_stopped(client, site):
    read_publicly, read_with_a_token = post_task(client, 1.5), post_task(client, 1.5)
    token = {"Authorization": f"Bearer {token_of(client)}"}
    wait_past(max(read_publicly.deadline, read_with_a_token.deadline))

    kept = {}
    for path, headers, state in TASK_DOORS:
        url = path.format(id=read_publicly.id)
        first = client.get(url, headers=headers)  # Cairn evaluates it, nginx keeps the answer
        assert first.status_code == 200 and state(first, read_publicly.id) == "evaluated"
        assert first.headers["Cache-Control"] == IMMUTABLE
        assert first.headers["X-Cache-Status"] == "MISS"
        kept[url] = first.content
        with_token = client.get(url, headers={**headers, **token})
        assert with_token.headers["X-Cache-Status"] == "BYPASS"
        assert with_token.headers["Cache-Control"] == IMMUTABLE
        unseen = client.get(path.format(id=read_with_a_token.id), headers={**headers, **token})
        assert unseen.status_code == 200 and state(unseen, read_with_a_token.id) == "evaluated"
        assert unseen.headers["X-Cache-Status"] == "BYPASS"

    site.stop_cairn()
    try:
        for path, headers, _ in TASK_DOORS:
            url = path.format(id=read_publicly.id)
            cached = client.get(url, headers=headers)
            assert (cached.status_code, cached.headers["X-Cache-Status"]) == (200, "HIT"), url
            assert cached.content == kept[url]
            revalidated = client.get(
                url, headers={**headers, "If-None-Match": cached.headers["ETag"]}
            )
            assert revalidated.status_code == 304
            # A token is not answered from the cache, and what Cairn answered one was not kept.
            assert client.get(url, headers={**headers, **token}).status_code == 502
            never_kept = client.get(path.format(id=read_with_a_token.id), headers=headers)
            assert never_kept.status_code == 502, url
    finally:
        site.start_cairn()


def test_no_door_serves_an_open_task_past_its_deadline(client):
    posted = post_task(client, 6)
    answers: list[tuple[str, datetime, str, str]] = []  # door, asked at, X-Cache-Status, state
    while datetime.now(UTC) < posted.deadline + timedelta(seconds=2):
        for path, headers, state in TASK_DOORS + LIST_DOORS:
            asked_at = datetime.now(UTC)
            answer = client.get(path.format(id=posted.id), headers=headers)
            assert answer.status_code == 200, answer.text
            answers.append(
                (path, asked_at, answer.headers["X-Cache-Status"], state(answer, posted.id))
            )
        time.sleep(0.05)

    after = [answer for answer in answers if answer[1] > posted.deadline]
    assert after and all(state == "evaluated" for _, _, _, state in after), after
    # The cache did keep the open task, for the seconds its deadline allowed.
    assert {path for path, _, status, state in answers if (status, state) == ("HIT", "open")} == {
        path for path, _, _ in TASK_DOORS + LIST_DOORS
    }
