"""The read cache (`a2a_gateway.read_cache`) across processes: two uvicorn processes on one
PostgreSQL, no worker. Each process keeps the A2A answers of open tasks and pages in memory and
drops them when any process writes; these tests write through one process and read through the
other, let a cached open task reach its deadline, and kill a process's listener connection.

What a process promises is that a write is seen by every other process's reads starting
`SILENCE_S` after the writing process's notification (sent as soon as the write commits, before
its answer; usually the next read sees it: a notification arrives within milliseconds), so the
reads after a write are asked once that bound has passed since the write's answer."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import psycopg
import pytest

from a2a_gateway.read_cache import CHANNEL, KEEP_S, SILENCE_S
from tests.deploy.conftest import two_web_processes
from tests.deploy.postgres import PrivatePostgres
from tests.deploy.processes import Deployment, Service, database_client_ports
from tests.factories import (
    contribution_payload,
    deadline_in,
    open_task_payload,
    open_task_request,
)

A2A = {"A2A-Version": "1.0", "Content-Type": "application/json"}
LISTENER = "cairn-read-cache"  # its connection's application_name


@pytest.fixture(scope="module")
def deployment(postgres: PrivatePostgres, tmp_path_factory) -> Iterator[Deployment]:
    logs = tmp_path_factory.mktemp("logs-read-cache")
    yield from two_web_processes(postgres, "cairn_read_cache", "orm", logs)


def _sql(deployment: Deployment, sql: str, *params: Any) -> list[tuple]:
    with psycopg.connect(deployment.database_url, autocommit=True) as conn:
        cursor = conn.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def _write(url: str, path: str, payload: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(f"{url}/api/agent/register", json={}, timeout=10)
    assert response.status_code == 201, response.text
    headers = {
        "Authorization": f"Bearer {response.json()['token']}",
        "Idempotency-Key": str(uuid.uuid4()),
    }
    response = httpx.post(f"{url}{path}", json=payload, headers=headers, timeout=10)
    assert response.status_code == 201, response.text
    return response.json()


def _post(url: str, seconds: float) -> tuple[str, datetime]:
    request = open_task_request(
        title=f"Cached {uuid.uuid4().hex[:8]}", deadline=deadline_in(seconds)
    )
    task = _write(url, "/api/a2a-tasks", open_task_payload(request))["task"]
    return task["id"], datetime.fromisoformat(task["deadline"].replace("Z", "+00:00"))


def _contribute(url: str, task_id: str) -> None:
    _write(url, f"/api/a2a-tasks/{task_id}/contributions", contribution_payload())


def _rpc(url: str, method: str, params: dict[str, Any]) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = httpx.post(f"{url}/api/a2a", json=body, headers=A2A, timeout=10)
    assert response.status_code == 200 and "result" in response.json(), response.text
    return response.json()["result"]


def _seen(url: str, task_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The task's Cairn metadata as GetTask and as the first ListTasks page show it, each read
    twice (the second from memory, once the first was kept)."""
    for _ in range(2):
        task = _rpc(url, "GetTask", {"id": task_id})
        page = _rpc(url, "ListTasks", {"pageSize": 50})
    [listed] = [item for item in page["tasks"] if item["id"] == task_id]
    return task["metadata"]["cairn"], listed["metadata"]["cairn"]


def _after_the_bound() -> None:
    time.sleep(SILENCE_S + 0.1)


def _listeners(deployment: Deployment, web: Service) -> list[int]:
    """The backend pids of this web process's listener connections."""
    ports = database_client_ports(web.tree(), deployment.postgres.port)
    held = set().union(*ports.values())
    return [
        pid
        for pid, port in _sql(
            deployment,
            "SELECT pid, client_port FROM pg_stat_activity WHERE application_name = %s",
            LISTENER,
        )
        if port in held
    ]


def _listening_again(deployment: Deployment, web: Service, gone: list[int]) -> list[int]:
    give_up = time.monotonic() + 15
    while time.monotonic() < give_up:
        pids = _listeners(deployment, web)
        if pids and not set(pids) & set(gone):
            return pids
        time.sleep(0.1)
    raise AssertionError(f"no listener came back\n{deployment.tails()}")


def test_each_process_listens_on_one_connection_of_its_own(deployment):
    for url in deployment.web_urls:
        _rpc(url, "ListTasks", {"pageSize": 1})  # the first read starts the listener
    webs = [service for service in deployment.services if service.name == "web"]
    assert [len(_listening_again(deployment, web, [])) for web in webs] == [1, 1]


def test_a_write_through_one_process_is_read_through_the_other(deployment):
    writer, reader = deployment.web_urls
    task_id, _ = _post(writer, 3600)
    assert [seen["contributions_received"] for seen in _seen(reader, task_id)] == [0, 0]

    _contribute(writer, task_id)
    _after_the_bound()

    assert [seen["contributions_received"] for seen in _seen(reader, task_id)] == [1, 1]
    task_id_2, _ = _post(writer, 3600)
    _after_the_bound()
    page = _rpc(reader, "ListTasks", {"pageSize": 50})
    assert page["tasks"][0]["id"] == task_id_2


def test_a_kept_answer_is_served_from_memory_until_a_notification_or_for_seconds(deployment):
    """Proof that the reader keeps answers: its task's stored form is changed under it by hand,
    announced to nobody, and it still serves what it kept; a notification naming the task (what
    a writing process sends) makes it read the row again; and unannounced, nothing is kept
    longer than `KEEP_S`."""
    writer, reader = deployment.web_urls
    task_id, _ = _post(writer, 3600)
    kept = _rpc(reader, "GetTask", {"id": task_id})
    _rpc(reader, "GetTask", {"id": task_id})
    marked = _marked(deployment, task_id, kept, "by hand")
    _after_the_bound()
    assert _rpc(reader, "GetTask", {"id": task_id}) == kept

    _sql(deployment, "SELECT pg_notify(%s, %s)", CHANNEL, task_id)
    _after_the_bound()
    assert _rpc(reader, "GetTask", {"id": task_id}) == marked

    again = _marked(deployment, task_id, kept, "by hand, again")
    time.sleep(KEEP_S + 0.1)
    assert _rpc(reader, "GetTask", {"id": task_id}) == again
    _contribute(writer, task_id)  # the row written again by its own writer
    _after_the_bound()
    assert _seen(reader, task_id)[0]["contributions_received"] == 1


def _marked(deployment: Deployment, task_id: str, task: dict[str, Any], mark: str) -> dict:
    """The task's stored GetTask form replaced by hand, with no notification: what it now holds."""
    marked = {**task, "metadata": {**task["metadata"], "marked": mark}}
    _sql(
        deployment,
        "UPDATE a2a_gateway_taskform SET task_json = %s WHERE task_id = %s",
        json.dumps(marked),
        task_id,
    )
    return marked


def test_a_kept_open_task_is_not_shown_open_past_its_deadline(deployment):
    writer, reader = deployment.web_urls
    task_id, deadline = _post(writer, 3)
    assert [seen["state"] for seen in _seen(reader, task_id)] == ["open", "open"]

    time.sleep(max(0.0, (deadline - datetime.now(UTC)).total_seconds()) + 0.05)

    # No worker runs: the reader's own read evaluates the task, as an uncached read would.
    assert [seen["state"] for seen in _seen(reader, task_id)] == ["evaluated", "evaluated"]


def test_a_killed_listener_connection_stops_the_cache_until_it_listens_again(deployment):
    """While its listener is gone a process hears no write, so it must not serve what it kept:
    the read right after a write (well inside the second its listener waits to reconnect)
    already shows it."""
    writer, reader = deployment.web_urls
    reader_process = deployment.services[1]
    task_id, _ = _post(writer, 3600)
    _seen(reader, task_id)
    listeners = _listening_again(deployment, reader_process, [])

    _sql(deployment, "SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", listeners)
    time.sleep(
        0.2
    )  # the listener reads its connection's end at once; this is slack for a busy host
    _contribute(writer, task_id)  # announced while the reader hears nothing
    assert [seen["contributions_received"] for seen in _seen(reader, task_id)] == [1, 1]

    _listening_again(deployment, reader_process, listeners)
    _seen(reader, task_id)
    _contribute(writer, task_id)
    _after_the_bound()
    assert [seen["contributions_received"] for seen in _seen(reader, task_id)] == [2, 2]
