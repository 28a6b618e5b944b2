"""SPEC §8.4, "One task, one Task", as clients meet it: two uvicorn processes on one PostgreSQL and
no worker, so the first reads at the deadline are what evaluates the tasks. Every question
(GetTask of a task, a ListTasks page) gets the same bytes whichever binding, process or moment
answers it: at the deadline while the first reads evaluate, later, from the other process and
after a restart; and those bytes are the SDK's serialiser's for that Task (a double is `2.0`)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from a2a.server.routes.common import serialize_list_tasks_response
from a2a.types import ListTasksResponse, Task
from google.protobuf.json_format import MessageToDict, ParseDict

from tests.deploy.conftest import two_web_processes
from tests.deploy.postgres import PrivatePostgres
from tests.deploy.processes import Deployment
from tests.factories import (
    contribution_payload,
    contribution_report,
    deadline_in,
    open_task_payload,
    open_task_request,
)
from tests.strict_json import strictly

A2A = {"A2A-Version": "1.0", "Content-Type": "application/json"}
ENVELOPE = b'{"jsonrpc":"2.0","id":1,"result":'


@pytest.fixture(scope="module")
def deployment(postgres: PrivatePostgres, tmp_path_factory) -> Iterator[Deployment]:
    """Two web processes and no worker: only reads can evaluate a task at its deadline."""
    logs = tmp_path_factory.mktemp("logs-one-task")
    yield from two_web_processes(postgres, "cairn_one_task", "orm", logs)


def _agent(url: str) -> dict[str, str]:
    response = httpx.post(f"{url}/api/agent/register", json={}, timeout=10)
    assert response.status_code == 201, response.text
    return {"Authorization": f"Bearer {response.json()['token']}"}


def _write(url: str, path: str, payload: dict[str, Any]) -> dict[str, Any]:
    headers = _agent(url) | {"Idempotency-Key": str(uuid.uuid4())}
    response = httpx.post(f"{url}{path}", json=payload, headers=headers, timeout=10)
    assert response.status_code == 201, response.text
    return response.json()


def _tasks(url: str, seconds: float) -> tuple[dict[str, str], datetime]:
    """A task that will resolve and one that will be unresolved, both closing in `seconds`, and
    one that stays open. `seconds` must cover three posts and four contributions, each with its
    own registration, on a machine busy with the rest of the suite."""

    def post(seconds: float) -> tuple[str, str]:
        request = open_task_request(title=f"One task {uuid.uuid4().hex[:8]}")
        request["deadline"] = deadline_in(seconds)
        task = _write(url, "/api/a2a-tasks", open_task_payload(request))["task"]
        return task["id"], task["deadline"]

    (resolved, deadline), (unresolved, later), (open_id, _) = (
        post(seconds),
        post(seconds),
        post(3600),
    )
    for task_id, verdicts in (
        (resolved, ["source_supported", "source_supported"]),
        (unresolved, ["source_unclear"]),
        (open_id, ["source_contradicted"]),
    ):
        for verdict in verdicts:
            report = contribution_report(verdict=verdict)
            _write(url, f"/api/a2a-tasks/{task_id}/contributions", contribution_payload(report))
    # The second task closes after the first, by as long as the first post took (on a busy
    # machine, seconds): both have closed only at the later deadline.
    closes = datetime.fromisoformat(max(deadline, later).replace("Z", "+00:00"))
    return {"resolved": resolved, "unresolved": unresolved, "open": open_id}, closes


def _questions(ids: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    """(binding, method, params) of every question: GetTask of each task, and the first page of
    ListTasks with and without artifacts, filtered and not."""
    asked: list[tuple[str, str, dict[str, Any]]] = []
    for task_id in ids.values():
        asked += [("jsonrpc", "GetTask", {"id": task_id}), ("rest", "GetTask", {"id": task_id})]
        asked.append(("v0.3", "tasks/get", {"id": task_id}))
    for params in (
        {"includeArtifacts": True, "pageSize": 10},
        {"pageSize": 10},
        {"status": "TASK_STATE_COMPLETED", "includeArtifacts": True},
        {"contextId": ids["unresolved"], "includeArtifacts": True},
    ):
        asked += [("jsonrpc", "ListTasks", params), ("rest", "ListTasks", params)]
    return asked


def _ask(
    client: httpx.Client, url: str, binding: str, method: str, params: dict[str, Any]
) -> bytes:
    """The answer's result, as the bytes the binding sent: JSON-RPC's without its envelope."""
    if binding == "rest":
        query = {
            key: json.dumps(value) if isinstance(value, bool) else value
            for key, value in params.items()
        }
        path = f"/api/a2a/tasks/{query.pop('id')}" if method == "GetTask" else "/api/a2a/tasks"
        response = client.get(f"{url}{path}", params=query, headers={"A2A-Version": "1.0"})
        assert response.status_code == 200, response.text
        return response.content
    headers = A2A if binding == "jsonrpc" else {"Content-Type": "application/json"}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = client.post(f"{url}/api/a2a", json=body, headers=headers)
    assert response.status_code == 200 and response.content.startswith(ENVELOPE), response.text
    return response.content[len(ENVELOPE) : -1]


def _answers(urls: list[str], questions: list, rounds: int = 1) -> dict[tuple, set[bytes]]:
    """Every question asked `rounds` times of every process, all at once."""
    jobs = [(url, question) for _ in range(rounds) for url in urls for question in questions]
    found: dict[tuple, set[bytes]] = {}
    with httpx.Client(timeout=30) as client, ThreadPoolExecutor(25) as pool:
        results = pool.map(lambda job: (job[1], _ask(client, job[0], *job[1][:2], job[1][2])), jobs)
        for (binding, method, params), body in results:
            key = (binding, method, json.dumps(params, sort_keys=True))
            found.setdefault(key, set()).add(body)
    return found


def _one_answer_each(found: dict[tuple, set[bytes]]) -> dict[tuple, bytes]:
    several = {key: len(bodies) for key, bodies in found.items() if len(bodies) != 1}
    assert not several, f"one question, several answers: {several}"
    return {key: next(iter(bodies)) for key, bodies in found.items()}


def _sdk_task(body: bytes) -> Any:
    """What the SDK's dispatcher writes of the Task these bytes hold."""
    return MessageToDict(ParseDict(json.loads(body), Task()), preserving_proto_field_name=False)


def _sdk_page(body: bytes, include_artifacts: bool) -> Any:
    page = ParseDict(json.loads(body), ListTasksResponse())
    return serialize_list_tasks_response(page, include_artifacts)


def test_every_question_gets_one_answer_on_every_path_process_and_restart(deployment):
    urls = deployment.web_urls
    ids, closes = _tasks(urls[0], seconds=10)
    questions = _questions(ids)
    time.sleep(max(0.0, (closes - datetime.now(UTC)).total_seconds()) + 0.2)

    # At the deadline, nothing has evaluated the two closed tasks: the first reads do, 25 at once
    # on both processes, and every one of them gets the evaluated form.
    at_the_deadline = _one_answer_each(_answers(urls, questions, rounds=2))
    later = _one_answer_each(_answers(urls, questions))
    assert later == at_the_deadline

    deployment.services[0].terminate(timeout=15)
    deployment.web_urls.remove(urls[0])
    deployment.start_web()
    after_a_restart = _one_answer_each(_answers(deployment.web_urls, questions))
    assert after_a_restart == at_the_deadline

    by_question = at_the_deadline
    for name, task_id in ids.items():
        key = json.dumps({"id": task_id}, sort_keys=True)
        task_bytes = by_question[("jsonrpc", "GetTask", key)]
        assert by_question[("rest", "GetTask", key)] == task_bytes, name
        assert strictly(_sdk_task(task_bytes)) == strictly(task_bytes), name
        cairn = json.loads(task_bytes)["metadata"]["cairn"]
        assert '"min_independent":2.0' in task_bytes.decode(), "a double, as the SDK writes it"
        assert cairn["state"] == ("open" if name == "open" else "evaluated"), name
        v0_3 = json.loads(by_question[("v0.3", "tasks/get", key)])
        assert (v0_3["id"], v0_3["metadata"]["cairn"]) == (task_id, cairn)

    tasks_in_pages: dict[str, list[Any]] = {}
    for (_binding, method, params), body in by_question.items():
        if method != "ListTasks":
            continue
        assert by_question[("rest", method, params)] == body, params
        with_artifacts = json.loads(params).get("includeArtifacts", False)
        assert strictly(_sdk_page(body, with_artifacts)) == strictly(body), params
        for listed in json.loads(body)["tasks"]:
            tasks_in_pages.setdefault(listed["id"], []).append((with_artifacts, listed))
    for name, task_id in ids.items():
        task = ParseDict(
            json.loads(by_question[("jsonrpc", "GetTask", json.dumps({"id": task_id}))]), Task()
        )
        for with_artifacts, listed in tasks_in_pages[task_id]:
            expected = Task()
            expected.CopyFrom(task)
            if not with_artifacts:
                del expected.artifacts[:]
            assert ParseDict(listed, Task()) == expected, (name, with_artifacts)
