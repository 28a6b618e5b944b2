"""Reading tasks over the plain HTTP routes (SPEC §9): one task, lists by mode with cursors, `mine`."""

from __future__ import annotations

import itertools

import pytest

from agents.services import agent_revoke
from tasks.models import Task
from tasks.rendered import task_view
from tests.factories import (
    contribution_payload,
    contribution_report,
    deadline_in,
    open_task_payload,
    open_task_request,
)
from tests.http.conftest import bearer, refused, wait_past

VIEW_FIELDS = [
    "id", "title", "question", "sources", "acceptance_criteria", "deadline", "min_independent",
    "max_contributors", "budget", "public_input_digest", "created_at", "state", "contributions_received",
    "outcome", "verdict", "evaluated_at", "evaluation",
]  # fmt: skip


def _view_now(task: Task) -> dict:
    task.refresh_from_db()
    return task_view(task)


def test_one_task_is_the_public_view_field_by_field(api, poster, post_task, make_agent, contribute):
    task = post_task(poster)
    contribute(make_agent(), task)

    response = api.get(f"/api/a2a-tasks/{task.id}")

    assert response.status_code == 200
    view = response.json()
    assert list(view) == VIEW_FIELDS
    assert view == _view_now(task)
    assert (
        view["state"] == "open"
        and view["contributions_received"] == 1
        and view["evaluation"] is None
    )


def test_one_task_shows_no_agent_and_no_sealed_content(
    api, poster, post_task, make_agent, contribute
):
    task = post_task(poster)
    contributor = make_agent("secret-label")
    contribute(
        contributor,
        task,
        contribution_payload(contribution_report(summary="A sealed summary nobody reads early.")),
    )

    text = api.get(f"/api/a2a-tasks/{task.id}").text + api.get("/api/a2a-tasks").text

    for hidden in (
        str(poster.agent.id),
        str(contributor.agent.id),
        "secret-label",
        "poster",
        "A sealed summary",
    ):
        assert hidden not in text


def test_an_unknown_task_is_not_found(api):
    refused(api.get("/api/a2a-tasks/5f0c6f0e-0d5b-4c43-9a51-2b1b8c0f9e10"), 404, "not_found")
    refused(api.get("/api/a2a-tasks/not-a-uuid"), 404, "not_found")


def test_an_overdue_task_is_evaluated_before_it_is_shown(
    api, short_deadlines, poster, post_task, make_agent, contribute
):
    task = post_task(poster, open_task_payload(open_task_request(deadline=deadline_in(1.5))))
    contribute(make_agent(), task)
    contribute(make_agent(), task)
    wait_past(task.deadline_text)

    view = api.get(f"/api/a2a-tasks/{task.id}").json()

    assert (
        view["state"] == "evaluated"
        and view["outcome"] == "resolved"
        and view["verdict"] == "source_supported"
    )
    assert [item["report"]["summary"] for item in view["evaluation"]["contributions"]] == [
        contribution_report()["summary"]
    ] * 2
    assert view == _view_now(task)


@pytest.fixture
def open_and_evaluated(
    settings, short_deadlines, make_agent, post_task, contribute
) -> dict[str, list[str]]:
    """Five open tasks and four evaluated ones (resolved, contested, unresolved twice), ids by mode."""
    settings.CAIRN_TASKS_PER_AGENT_PER_DAY = 20
    settings.CAIRN_OPEN_TASKS_PER_AGENT = 20
    poster = make_agent()
    closing = [
        post_task(poster, open_task_payload(open_task_request(deadline=deadline_in(1.5))))
        for _ in range(4)
    ]
    contribute(make_agent(), closing[0])
    contribute(make_agent(), closing[0])
    contribute(make_agent(), closing[1])
    contribute(
        make_agent(),
        closing[1],
        contribution_payload(contribution_report(verdict="source_contradicted")),
    )
    open_tasks = [post_task(poster) for _ in range(5)]
    wait_past(max(task.deadline_text for task in closing))
    return {
        "open": [str(task.id) for task in open_tasks],
        "evaluated": [str(task.id) for task in closing],
        "all": [str(task.id) for task in open_tasks + closing],
    }


def _walk(api, mode: str, limit: int) -> list[dict]:
    views, cursor, pages = [], None, 0
    while True:
        params = {"mode": mode, "limit": limit} | ({"cursor": cursor} if cursor else {})
        response = api.get("/api/a2a-tasks", params=params)
        assert response.status_code == 200, response.text
        body = response.json()
        assert set(body) == {"tasks", "next_cursor"} and len(body["tasks"]) <= limit
        views += body["tasks"]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            return views
        assert isinstance(cursor, str) and cursor and pages < 20


def test_walking_each_mode_to_the_end_lists_every_task_once_newest_first(api, open_and_evaluated):
    for (mode, expected), limit in itertools.product(open_and_evaluated.items(), (1, 2, 4, 50)):
        views = _walk(api, mode, limit)

        ids = [view["id"] for view in views]
        assert sorted(ids) == sorted(expected), (mode, limit)
        assert len(set(ids)) == len(ids), (mode, limit)
        assert views == [
            task_view(task)
            for task in Task.objects.filter(pk__in=ids).order_by("-status_timestamp", "-id")
        ]
        assert {view["state"] for view in views} == (
            {"open", "evaluated"} if mode == "all" else {mode}
        )


def test_the_list_defaults_to_every_mode_and_fifty(api, open_and_evaluated):
    body = api.get("/api/a2a-tasks").json()

    assert sorted(view["id"] for view in body["tasks"]) == sorted(open_and_evaluated["all"])
    assert body["next_cursor"] is None
    evaluated = [view for view in body["tasks"] if view["state"] == "evaluated"]
    assert {view["outcome"] for view in evaluated} == {"resolved", "contested", "unresolved"}


def test_a_cursor_only_works_with_its_own_mode(api, poster, post_task):
    post_task(poster)
    post_task(poster)
    cursor = api.get("/api/a2a-tasks", params={"mode": "open", "limit": 1}).json()["next_cursor"]
    assert cursor

    refused(
        api.get("/api/a2a-tasks", params={"mode": "all", "limit": 1, "cursor": cursor}),
        400,
        "invalid_query",
    )
    refused(
        api.get("/api/a2a-tasks", params={"mode": "evaluated", "cursor": cursor}),
        400,
        "invalid_query",
    )
    refused(
        api.get("/api/a2a-tasks", params={"mode": "open", "cursor": cursor + "x"}),
        400,
        "invalid_query",
    )
    refused(
        api.get("/api/a2a-tasks", params={"mode": "open", "cursor": "garbage"}),
        400,
        "invalid_query",
    )
    assert (
        api.get("/api/a2a-tasks", params={"mode": "open", "limit": 1, "cursor": cursor}).status_code
        == 200
    )


BAD_QUERIES = [
    "mode=completed",
    "mode=",
    "limit=0",
    "limit=51",
    "limit=abc",
    "limit=-1",
    "limit=2.5",
    "limit=",
    "limit=1000",
    "page_size=10",
    "mode=open&mode=all",
    "format=xml",  # an unknown parameter like any other, not a renderer to pick
    "format=json",
]


def test_a_bad_list_query_is_refused(api):
    for query in BAD_QUERIES:
        error = refused(api.get(f"/api/a2a-tasks?{query}"), 400, "invalid_query", query)
        assert error["issues"] and error["issues"][0]["code"] == "invalid_query"
    assert api.get("/api/a2a-tasks?mode=open&limit=1&cursor=").status_code == 200


def test_single_resource_routes_take_no_query(api, poster, post_task):
    task = post_task(poster)
    refused(api.get(f"/api/a2a-tasks/{task.id}?mode=open"), 400, "invalid_query")
    refused(api.get(f"/api/a2a-tasks/{task.id}?format=xml"), 400, "invalid_query")
    refused(
        api.get("/api/a2a-tasks/mine?limit=1", headers=bearer(poster.token)), 400, "invalid_query"
    )


def test_mine_lists_own_tasks_and_own_sealed_reports_newest_first(
    api, make_agent, post_task, contribute
):
    agent = make_agent()
    other = make_agent()
    first = post_task(agent)
    second = post_task(other)
    third = post_task(other)
    report = contribution_report(summary="My own sealed summary, readable only by me.")
    receipt_second = contribute(agent, second, contribution_payload(report))["receipt"]
    receipt_third = contribute(agent, third)["receipt"]

    response = api.get("/api/a2a-tasks/mine", headers=bearer(agent.token))

    assert response.status_code == 200
    body = response.json()
    assert body["tasks"] == [_view_now(first)]
    assert [item["task_id"] for item in body["contributions"]] == [str(third.id), str(second.id)]
    assert body["contributions"][0]["receipt"] == receipt_third
    assert body["contributions"][1] == {
        "task_id": str(second.id),
        "receipt": receipt_second,
        "report": report,
    }
    assert api.get("/api/a2a-tasks/mine", headers=bearer(other.token)).json()["contributions"] == []


def test_mine_is_not_taken_for_a_task_id_and_needs_a_token(api, make_agent):
    agent = make_agent()

    for headers in ({}, bearer("cairn_unknown"), {"Authorization": "Basic abc"}):
        response = api.get("/api/a2a-tasks/mine", headers=headers)
        refused(response, 401, "unauthorized")
        assert response.headers["WWW-Authenticate"] == 'Bearer realm="cairn"'

    agent_revoke(agent=agent.agent)
    refused(api.get("/api/a2a-tasks/mine", headers=bearer(agent.token)), 401, "unauthorized")


def test_reads_stay_public_with_a_bad_token(api, poster, post_task):
    task = post_task(poster)
    assert api.get(f"/api/a2a-tasks/{task.id}", headers=bearer("cairn_nope")).status_code == 200
    assert api.get("/api/a2a-tasks", headers=bearer("cairn_nope")).status_code == 200


def test_a_task_cannot_be_deleted_or_edited(api, poster, post_task):
    task = post_task(poster)
    for method in ("DELETE", "PUT", "PATCH"):
        response = api.request(
            method, f"/api/a2a-tasks/{task.id}", headers=bearer(poster.token), json={}
        )
        assert response.status_code == 405, method
        assert response.json()["error"]["code"] == "method_not_allowed"
    assert api.get(f"/api/a2a-tasks/{task.id}").json() == _view_now(task)


def _a2a_view(api, task_id: str) -> dict:
    """The §3.2 view as the A2A door shows it: `metadata.cairn` plus the evaluation artifact."""
    envelope = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
    response = api.post("/api/a2a", json=envelope, headers={"A2A-Version": "1.0"})
    assert response.status_code == 200, response.text
    task = response.json()["result"]
    artifacts = task.get("artifacts", [])
    evaluation = artifacts[0]["parts"][0]["data"] if artifacts else None
    return {**task["metadata"]["cairn"], "evaluation": evaluation}


def test_the_http_view_equals_the_a2a_view_field_by_field(
    api, short_deadlines, poster, post_task, make_agent, contribute
):
    still_open = post_task(poster)
    closing = post_task(poster, open_task_payload(open_task_request(deadline=deadline_in(1.5))))
    for task in (still_open, closing):
        contribute(make_agent(), task)
    wait_past(closing.deadline_text)

    for task in (still_open, closing):
        http_view = api.get(f"/api/a2a-tasks/{task.id}").json()
        a2a_view = _a2a_view(api, str(task.id))
        for name in VIEW_FIELDS:
            assert http_view[name] == a2a_view[name], (name, task.id)
        assert set(a2a_view) == set(http_view)
    assert http_view["state"] == "evaluated" and http_view["evaluation"]["contributions"]
