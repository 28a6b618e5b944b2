"""SPEC §16: the operator's routes and logs, through a live server."""

from __future__ import annotations

import json
import socket
import time

import httpx
from django.db import connection

from tasks.jobs import evaluate_due
from tests.conftest import postgres_only
from tests.factories import deadline_in, open_task_payload, open_task_request


def test_healthz_answers_while_the_process_serves(http):
    response = http.get("/healthz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_readyz_needs_a_recent_sweep(http):
    response = http.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unready"
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["sweep"]["ok"] is False
    assert "sweep" in body["checks"]["sweep"]["detail"]

    evaluate_due()  # what the worker's periodic job runs

    response = http.get("/readyz")
    assert response.status_code == 200
    assert response.json()["status"] == "ready"
    assert response.json()["checks"]["sweep"]["last_finished_at"].endswith("Z")


def _samples(text: str) -> dict[str, float]:
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def test_metrics_count_requests_writes_tasks_and_evaluation_lag(http, make_agent, short_deadlines):
    agent = make_agent()
    payload = open_task_payload(open_task_request(deadline=deadline_in(2)))
    assert http.post("/api/a2a-tasks", json=payload, headers=agent.headers).status_code == 201
    refused = http.post("/api/a2a-tasks", json={"schema": "nope"}, headers=agent.headers)
    assert refused.status_code == 422
    listed = http.get("/api/a2a/tasks", headers={"A2A-Version": "1.0"})  # the HTTP+JSON binding
    assert listed.status_code == 200
    time.sleep(2.2)
    evaluate_due()

    response = http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/plain")
    samples = _samples(response.text)
    assert samples['cairn_writes_total{code="",kind="task",result="accepted"}'] >= 1
    assert samples['cairn_writes_total{code="unknown_schema",kind="task",result="refused"}'] >= 1
    assert samples['cairn_requests_total{door="http",method="POST",status="201"}'] >= 1
    assert samples['cairn_request_duration_seconds_count{door="http",method="POST"}'] >= 2
    assert samples['cairn_requests_total{door="a2a",method="GET",status="200"}'] >= 1
    assert samples['cairn_tasks{state="failed"}'] == 1
    assert samples['cairn_tasks{state="working"}'] == 0
    assert samples["cairn_tasks_overdue"] == 0
    assert samples["cairn_evaluation_lag_seconds_count"] == 1
    assert samples['cairn_evaluation_lag_seconds_bucket{le="60.0"}'] == 1
    # The post and the evaluation each queued a log entry; nothing has sequenced them here.
    assert samples["cairn_log_entries"] == 0
    assert samples["cairn_log_sequencer_lag_seconds"] > 2


def test_metrics_can_require_a_token(http, settings):
    settings.CAIRN_METRICS_TOKEN = "scrape-secret"
    refused = http.get("/metrics")
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "unauthorized"
    assert http.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    allowed = http.get("/metrics", headers={"Authorization": "Bearer scrape-secret"})
    assert allowed.status_code == 200
    assert "cairn_tasks" in allowed.text


def test_json_logs_with_client_mistakes_at_info_and_no_traceback(served):
    url, log = served
    bad_envelope = httpx.post(
        f"{url}/api/a2a",
        content=b'{"jsonrpc": "2.0", "id": 1, "method": 5}',
        headers={"A2A-Version": "1.0"},
    )
    assert bad_envelope.json()["error"]["code"] == -32600
    bad_params = httpx.post(
        f"{url}/api/a2a",
        json={"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": 7}},
        headers={"A2A-Version": "1.0"},
    )
    assert bad_params.json()["error"]["code"] == -32602
    assert httpx.get(f"{url}/api/a2a-tasks/not-a-task").status_code == 404
    time.sleep(0.5)

    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    assert records, "the server logged nothing"
    assert all({"time", "level", "logger", "message"} <= record.keys() for record in records)
    mistakes = [
        r
        for r in records
        if r["logger"] in ("django.request", "a2a.server.routes.jsonrpc_dispatcher")
    ]
    assert mistakes, records
    assert {r["level"] for r in mistakes} == {"INFO"}
    assert not any("exc_info" in r or "Traceback" in r["message"] for r in mistakes)


def _closed_within(sock: socket.socket, seconds: float) -> float | None:
    started = time.monotonic()
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return None
    return time.monotonic() - started


def test_idle_connections_are_closed_within_thirty_seconds(served):
    url, _ = served
    port = int(url.rsplit(":", 1)[1])
    silent = socket.create_connection(("127.0.0.1", port))
    kept_alive = socket.create_connection(("127.0.0.1", port))
    kept_alive.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")

    assert _closed_within(silent, 30) is not None, "a connection that never spoke was kept open"
    assert _closed_within(kept_alive, 30) is not None, "an idle keep-alive connection was kept open"


def _response(sock: socket.socket) -> tuple[int, bytes]:
    """One HTTP/1.1 response read off the socket: its status and body (by Content-Length)."""
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(4096)
    head, _, body = received.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")[1:]
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(4096)
    return int(head.split(b" ", 2)[1]), body[:length]


def test_a_head_the_http_parser_refuses_is_its_plain_400_and_the_connection_ends(served):
    """A header value holding DEL (RFC 9110 has none), sent in two pieces on a connection that has
    served a request already: the HTTP layer's plain 400, and the connection is closed."""
    url, _ = served
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert _response(sock)[0] == 200
        sock.sendall(b"GET /api/no-such-route HTTP/1.1\r\nHost: localhost\r\nX-Note: li")
        time.sleep(0.2)
        sock.sendall(b"ne\x7f\r\n\r\n")
        status, body = _response(sock)
        assert (status, body) == (400, b"Invalid HTTP request received.")
        assert sock.recv(4096) == b"", "the connection was kept open"


def test_bytes_that_are_not_http_are_a_client_mistake_in_the_log(served):
    url, log = served
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Note: nul\x00\r\n\r\n")
        answer = b""
        while chunk := sock.recv(4096):  # the parser answers and closes the connection
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 400 "), answer
    time.sleep(0.5)

    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    refused = [r for r in records if r["message"] == "Invalid HTTP request received."]
    assert refused, records
    assert {r["level"] for r in refused} == {"INFO"}


@postgres_only("SQLite has no pool of connections")
def test_a_pooled_connection_the_database_ended_is_replaced_before_a_request_uses_it(http):
    """The pool lends no connection the server has ended (SPEC §16): after PostgreSQL drops every
    connection but this test's, the next requests all succeed."""
    assert http.get("/api/a2a-tasks").status_code == 200
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        ended = cursor.rowcount
        for _ in range(50):
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            if cursor.fetchone()[0] == 0:
                break
            time.sleep(0.05)
    assert ended >= 1, "the pool held no idle connection to end"
    statuses = [http.get("/api/a2a-tasks").status_code for _ in range(5)]
    assert statuses == [200] * 5
