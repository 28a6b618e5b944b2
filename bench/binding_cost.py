"""CPU per read in the server's process, JSON-RPC against HTTP+JSON, on the same tasks and pages,
and the card's.

wrk's rates on a shared machine move more between runs than the bindings differ (bench/README.md),
so this times what each binding costs the server itself: the ASGI app uvicorn serves
(`a2a_gateway.asgi.endpoint`) called in process with each request, on the read pool, in rounds
that alternate the two bindings, timed by the process's CPU clock. PostgreSQL's own CPU is left
out: both bindings run the same statement (`a2a_gateway.stored_reads`). Every reply is checked (200,
no error) before it counts.

    taskset -c 0 .venv/bin/python bench/binding_cost.py [database]   # default cairn_bench_pg_1k
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import cairn_env, pg_url  # noqa: E402  (bench/bench.py, beside this file)

os.environ.update(cairn_env(pg_url(sys.argv[1] if len(sys.argv) > 1 else "cairn_bench_pg_1k")))

import django  # noqa: E402

django.setup()

from a2a_gateway import read_connections  # noqa: E402
from a2a_gateway.asgi import endpoint  # noqa: E402
from a2a_gateway.card import CARD_PATH  # noqa: E402
from tasks.models import Task  # noqa: E402

ROUNDS = 7
PER_ROUND = 300
Request = tuple[str, str, bytes, bytes]  # method, path, query string, body


def jsonrpc(method: str, params: dict[str, Any]) -> Request:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return ("POST", "/api/a2a", b"", json.dumps(body).encode())


def rest(path: str, query: dict[str, Any] | None = None) -> Request:
    return ("GET", path, urllib.parse.urlencode(query or {}).encode(), b"")


async def answer(request: Request) -> dict[str, Any]:
    method, path, query_string, body = request
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "query_string": query_string,
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"content-type", b"application/json"),
            (b"a2a-version", b"1.0"),
        ],
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await endpoint(scope, receive, send)
    status, reply = sent[0]["status"], sent[1]["body"]
    if status != 200 or b'"error"' in reply:
        raise RuntimeError(f"{method} {path}: {status} {reply[:300]!r}")
    return json.loads(reply)


async def cpu_per_request(requests: Callable[[int], Request]) -> float:
    started = time.process_time()
    for i in range(PER_ROUND):
        await answer(requests(i))
    return (time.process_time() - started) / PER_ROUND * 1e6


async def card_cost() -> float:
    scope = {
        "type": "http",
        "method": "GET",
        "path": CARD_PATH,
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1")],
    }
    statuses = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    started = time.process_time()
    for _ in range(PER_ROUND):
        await endpoint(scope, receive, send)
    cost = (time.process_time() - started) / PER_ROUND * 1e6
    if set(statuses) != {200}:
        raise RuntimeError(f"the card: {set(statuses)}")
    return cost


async def main(ids: list[str]) -> None:
    page = {"pageSize": 50}
    token = ""
    for _ in range(20):  # 1,000 tasks deep, as bench.py's list_deep
        listed = await answer(
            jsonrpc("ListTasks", {**page, **({"pageToken": token} if token else {})})
        )
        if not listed["result"]["nextPageToken"]:
            break
        token = listed["result"]["nextPageToken"]
    deep = {**page, "pageToken": token}
    pairs: dict[str, tuple[Callable[[int], Request], Callable[[int], Request]]] = {
        "GetTask": (
            lambda i: jsonrpc("GetTask", {"id": ids[i % len(ids)]}),
            lambda i: rest(f"/api/a2a/tasks/{ids[i % len(ids)]}"),
        ),
        "ListTasks(50), first page": (
            lambda i: jsonrpc("ListTasks", page),
            lambda i: rest("/api/a2a/tasks", page),
        ),
        "ListTasks(50), 1,000 deep": (
            lambda i: jsonrpc("ListTasks", deep),
            lambda i: rest("/api/a2a/tasks", deep),
        ),
    }
    for rpc_request, rest_request in pairs.values():  # warm-up: the pool, the kept forms
        await cpu_per_request(rpc_request)
        await cpu_per_request(rest_request)
    print(f"CPU of this process per read, µs: median of {ROUNDS} alternating rounds of {PER_ROUND}")
    print("| read | JSON-RPC | HTTP+JSON | HTTP+JSON / JSON-RPC |")
    print("|---|---:|---:|---:|")
    for name, (rpc_request, rest_request) in pairs.items():
        rpc_costs, rest_costs = [], []
        for _ in range(ROUNDS):
            rpc_costs.append(await cpu_per_request(rpc_request))
            rest_costs.append(await cpu_per_request(rest_request))
        rpc_cost, rest_cost = statistics.median(rpc_costs), statistics.median(rest_costs)
        print(f"| {name} | {rpc_cost:.0f} | {rest_cost:.0f} | {rest_cost / rpc_cost:.2f} |")
    card = [await card_cost() for _ in range(ROUNDS)]
    print(
        f"The card (one answer for both bindings, its JSON not parsed): {statistics.median(card):.0f} µs"
    )
    await read_connections.close()


asyncio.run(main([str(key) for key in Task.objects.values_list("id", flat=True)[:1000]]))
