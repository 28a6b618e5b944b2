"""Each binding's wrapping of the one read against the SDK's own dispatchers (whose handler asks
the same read): a generated corpus of requests (every method, every parameter shape and error,
tasks in every state) answered both ways by the same endpoint, the same status, headers and JSON
compared strictly (`2` is not `2.0`; key order is protobuf's own), over JSON-RPC 1.0, A2A 0.3's
JSON-RPC (against the SDK's 0.3 adapter) and HTTP+JSON; the statements run on Django's connection
and on the ASGI app's own pool on the event loop."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from a2a.types import GetTaskRequest, ListTasksRequest
from asgiref.sync import async_to_sync
from starlette.datastructures import QueryParams

from a2a_gateway import read_connections
from a2a_gateway.http_json_binding import fast_rest_read, rest_reply
from a2a_gateway.jsonrpc_binding import a2a_reply, fast_read
from a2a_gateway.kept_forms import EVALUATED_FORMS, evaluated_forms
from a2a_gateway.stored_reads import DJANGO_SOURCE, DjangoSource
from tasks.evaluation import tasks_evaluate_due
from tasks.models import Task
from tests.conftest import postgres_only
from tests.factories import (
    contribution_payload,
    contribution_report,
    deadline_in,
    open_task_payload,
    open_task_request,
)
from tests.strict_json import strictly

HEADERS = {"content-type": "application/json", "a2a-version": "1.0"}
V0_3_HEADERS = {"content-type": "application/json"}  # a 0.3 client sends no A2A-Version
STATUSES = [
    None,
    "TASK_STATE_WORKING",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_UNSPECIFIED",
    "UNRECOGNIZED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_BOGUS",
    3,
    0,
]
PAGE_SIZES = [None, 1, 2, 3, 50, 51, 100, 0, 101, -1, "2", "x"]
V0_3_OTHER_METHODS = [
    "tasks/cancel",
    "message/stream",
    "tasks/resubscribe",
    "tasks/pushNotificationConfig/get",
    "tasks/pushNotificationConfig/list",
    "agent/getAuthenticatedExtendedCard",
]
OTHER_METHODS = [
    "SendStreamingMessage",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard",
    "NoSuchMethod",
    "",
]


def answered(status: int, body: bytes, headers: Any) -> tuple[int, Any, Any]:
    """An answer as a client reads it: its status, its headers and its JSON."""
    return status, json.loads(body), headers


def strict(answer: tuple[Any, ...]) -> tuple[Any, ...]:
    """An answer to compare: its JSON strictly typed (`2` is not `2.0`), the rest as it is."""
    status, body, *rest = answer
    return (status, strictly(body), *rest)


def reply(document: Any, *, fast: bool, headers: dict[str, str] | None = None, raw=None):
    body = raw if raw is not None else json.dumps(document).encode()
    answer = async_to_sync(a2a_reply)(
        path="/api/a2a",
        headers=headers if headers is not None else HEADERS,
        body=body,
        origin="http://testserver",
        fast_reads=fast,
    )
    return answered(answer.status, answer.body, answer.headers)


def rpc(method: str, params: Any = ..., request_id: Any = 1) -> dict[str, Any]:
    document: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not ...:
        document["params"] = params
    return document


@pytest.fixture
def tasks_in_every_state(make_agent, post_task, contribute, time_machine) -> dict[str, str]:
    """Resolved, contested, unresolved, open with and without contributions, and two open tasks
    that `past_the_second_deadline` puts past their deadline, with nothing evaluating them."""
    time_machine.move_to("2026-06-01T12:00:00Z", tick=False)

    def post(seconds: float):
        return post_task(
            make_agent(), open_task_payload(open_task_request(deadline=deadline_in(seconds)))
        )

    def send(task, verdicts):
        for verdict in verdicts:
            contribute(
                make_agent(), task, contribution_payload(contribution_report(verdict=verdict))
            )

    tasks = {
        "resolved": post(3600),
        "contested": post(3600),
        "unresolved": post(3600),
        "overdue_first": post(7200),
        "overdue_second": post(7200),
        "open_with_one": post(86400 * 3),
        "open_empty": post(86400 * 3),
    }
    send(tasks["resolved"], ["source_supported", "source_supported"])
    send(tasks["contested"], ["source_supported", "source_contradicted"])
    send(tasks["unresolved"], ["source_unclear"])
    send(tasks["open_with_one"], ["source_contradicted"])
    send(tasks["overdue_first"], ["source_supported"])
    time_machine.shift(timedelta(seconds=3601))
    assert tasks_evaluate_due() == 3
    return {name: str(task.pk) for name, task in tasks.items()}


def past_the_second_deadline(time_machine) -> None:
    time_machine.shift(timedelta(seconds=3600))


def corpus(
    task_ids: dict[str, str], token: str
) -> list[tuple[Any, dict[str, str] | None, bytes | None]]:
    """(document, headers, raw body) for every request; the overdue tasks come first so both
    paths meet them open, and the one that evaluates them answers for both."""
    ids = list(task_ids.values())
    unknown = str(uuid.UUID(int=7))
    requests: list[tuple[Any, dict[str, str] | None, bytes | None]] = []

    def add(document: Any, headers: dict[str, str] | None = None, raw: bytes | None = None):
        requests.append((document, headers, raw))

    add(rpc("GetTask", {"id": task_ids["overdue_first"]}))
    add(rpc("ListTasks", {"pageSize": 3}))
    id_shapes: list[Any] = [*ids, ids[0].upper(), "{" + ids[1] + "}", unknown, "not-a-uuid", "", 12]
    for task_id in id_shapes:
        for extra in ({}, {"tenant": "t"}, {"historyLength": 0}, {"historyLength": -1}, {"x": 1}):
            add(rpc("GetTask", {"id": task_id, **extra}))
            add(rpc("CancelTask", {"id": task_id, **extra}))
    # 2**70: beyond the 64 bits that orjson writes (`a2a_gateway.jsonrpc_binding._in_envelope`).
    for request_id in (1, "abc", None, 0, 2**40, "é", 2**70):
        add(rpc("GetTask", {"id": ids[0]}, request_id))
        add(rpc("ListTasks", {}, request_id))
    for weird in (1.5, True, [1], {"a": 1}):
        add(rpc("GetTask", {"id": ids[0]}, weird))
    add({"jsonrpc": "2.0", "method": "GetTask", "params": {"id": ids[0]}})  # a notification
    add(rpc("GetTask"))
    add(rpc("GetTask", None))
    add(rpc("GetTask", [ids[0]]))
    add(rpc("ListTasks"))
    add(rpc("ListTasks", None))
    add(rpc("ListTasks", "x"))
    for status in STATUSES:
        for page_size in PAGE_SIZES:
            params: dict[str, Any] = {}
            if status is not None:
                params["status"] = status
            if page_size is not None:
                params["pageSize"] = page_size
            for extra in (
                {},
                {"includeArtifacts": True},
                {"includeArtifacts": False},
                {"historyLength": 1},
            ):
                add(rpc("ListTasks", {**params, **extra}))
    for extra in (
        {"contextId": ids[0]},
        {"contextId": unknown},
        {"contextId": "nope"},
        {"statusTimestampAfter": "2026-06-01T12:00:00Z"},
        {"statusTimestampAfter": "yesterday"},
        {"tenant": "t"},
        {"historyLength": 2},
        {"historyLength": -2},
        {"pageToken": "garbage"},
        {"includeArtifacts": "yes"},
        {"unknownField": [1, 2]},
    ):
        add(rpc("ListTasks", {"pageSize": 2, **extra}))
    for method in OTHER_METHODS:
        add(rpc(method, {"id": ids[0]}))
    message = {"messageId": "m-1", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}
    add(rpc("SendMessage", {"message": message}))
    with_token = {**HEADERS, "authorization": f"Bearer {token}"}
    add(rpc("SendMessage", {"message": message}), with_token)
    add(rpc("SendMessage", {"message": {**message, "role": "ROLE_USER", "parts": []}}), with_token)
    for version in (None, "0.3", "1.1", "2.0"):
        headers = {"content-type": "application/json"}
        if version is not None:
            headers["a2a-version"] = version
        add(rpc("GetTask", {"id": ids[0]}), headers)
        add(rpc("ListTasks", {}), headers)
    add([rpc("GetTask", {"id": ids[0]})])
    add({**rpc("GetTask", {"id": ids[0]}), "jsonrpc": "1.0"})
    add(None, None, b"{not json")
    add(None, None, b"[" * 100 + b"]" * 100)
    return requests + v0_3_corpus(task_ids)


def v0_3_corpus(task_ids: dict[str, str]) -> list[tuple[Any, dict[str, str] | None, bytes | None]]:
    """A2A 0.3's tasks/get in every shape, beside its other methods: what the SDK's 0.3 adapter
    reads (its model, `historyLength` 0 as none) and refuses."""
    ids = list(task_ids.values())
    unknown = str(uuid.UUID(int=7))
    requests: list[tuple[Any, dict[str, str] | None, bytes | None]] = []

    def add(document: Any, headers: dict[str, str] = V0_3_HEADERS) -> None:
        requests.append((document, headers, None))

    id_shapes: list[Any] = [*ids, ids[0].upper(), "{" + ids[1] + "}", unknown, "not-a-uuid", "", 12]
    for task_id in id_shapes:
        for extra in (
            {},
            {"historyLength": 0},
            {"historyLength": None},
            {"historyLength": 2},
            {"historyLength": -1},
            {"historyLength": "0"},
            {"history_length": 0},
            {"metadata": {"a": 1}},
            {"tenant": "t"},
            {"x": 1},
        ):
            add(rpc("tasks/get", {"id": task_id, **extra}))
        add(rpc("tasks/cancel", {"id": task_id}))
    for request_id in (1, "abc", None, 0, 2**40, "é", 2**70, 1.5, True, [1]):
        add(rpc("tasks/get", {"id": ids[0]}, request_id))
    add({"jsonrpc": "2.0", "method": "tasks/get", "params": {"id": ids[0]}})  # a notification
    for params in (..., None, [ids[0]], "x", {}, {"id": None}, {"historyLength": 0}):
        add(rpc("tasks/get", params))
    for version in ("0.3", "0.3.0", "0.2", "1.0", "2.0", ""):
        add(rpc("tasks/get", {"id": ids[0]}), {**V0_3_HEADERS, "a2a-version": version})
    for method in V0_3_OTHER_METHODS:
        add(rpc(method, {"id": ids[0]}))
    add([rpc("tasks/get", {"id": ids[0]})])
    add({**rpc("tasks/get", {"id": ids[0]}), "jsonrpc": "1.0"})
    return requests


def page_tokens(status: Any, page_size: int) -> list[str]:
    """Every page token of a walk, as the SDK's dispatcher issues them."""
    tokens, token = [], ""
    while True:
        params: dict[str, Any] = {"pageSize": page_size, "pageToken": token}
        if status is not None:
            params["status"] = status
        _, body, _ = reply(rpc("ListTasks", params), fast=False)
        token = body["result"]["nextPageToken"]
        if not token:
            return tokens
        tokens.append(token)


def test_the_fast_path_answers_every_request_as_the_sdk_dispatcher_does(
    tasks_in_every_state, make_agent, time_machine
):
    requests = corpus(tasks_in_every_state, make_agent().token)
    for status, page_size in (
        (None, 1),
        (None, 2),
        ("TASK_STATE_WORKING", 1),
        ("TASK_STATE_COMPLETED", 1),
    ):
        for token in page_tokens(status, page_size):
            for asked in (
                {"status": status} if status else {},
                {},
                {"status": "TASK_STATE_FAILED"},
            ):
                requests.append(
                    (
                        rpc("ListTasks", {**asked, "pageSize": page_size, "pageToken": token}),
                        None,
                        None,
                    )
                )
    past_the_second_deadline(time_machine)
    assert len(requests) > 600

    for index, (document, headers, raw) in enumerate(requests):
        # Alternate which path goes first, so each meets an overdue task open at some point.
        order = (True, False) if index % 2 else (False, True)
        answers = {fast: reply(document, fast=fast, headers=headers, raw=raw) for fast in order}
        assert strict(answers[True]) == strict(answers[False]), (document, headers, raw)


def contributions(task: dict[str, Any]) -> int:
    return task["metadata"]["cairn"]["contributions_received"]


def test_reads_of_rendered_tasks_take_the_fast_path(tasks_in_every_state, time_machine):
    """The corpus above would pass if the fast path never answered: here it must, a task open
    past its deadline included, which the read has the domain evaluate first (SPEC §4.3)."""

    def fast(method: str, params: dict[str, Any]) -> bytes | None:
        return async_to_sync(fast_read)(method, rpc(method, params), 1)

    past_the_second_deadline(time_machine)
    overdue = tasks_in_every_state["overdue_first"]
    evaluated = json.loads(fast("GetTask", {"id": overdue}) or b"")
    assert evaluated["result"]["status"]["state"] == "TASK_STATE_FAILED"
    for name, task_id in tasks_in_every_state.items():
        if name != "overdue_second":
            served = fast("GetTask", {"id": task_id})
            assert served is not None and json.loads(served)["result"]["id"] == task_id
    for params in ({}, {"pageSize": 2}, {"status": "TASK_STATE_FAILED", "pageSize": 100}):
        listed = fast("ListTasks", params)
        assert listed is not None and json.loads(listed)["result"]["tasks"]
    states = [
        task["status"]["state"]
        for task in json.loads(fast("ListTasks", {}) or b"")["result"]["tasks"]
    ]
    assert states.count("TASK_STATE_WORKING") == 2  # the overdue ones were evaluated first


def test_v0_3_reads_of_rendered_tasks_take_the_fast_path(
    tasks_in_every_state, time_machine, make_agent, contribute
):
    """As over JSON-RPC 1.0, for 0.3's tasks/get; and an open task's stored 0.3 form follows a
    contribution."""

    def fast(params: dict[str, Any]) -> Any:
        served = async_to_sync(fast_read)("tasks/get", rpc("tasks/get", params), 1)
        return None if served is None else json.loads(served)["result"]

    def adapter(task_id: str) -> Any:
        return reply(rpc("tasks/get", {"id": task_id}), fast=False, headers=V0_3_HEADERS)

    past_the_second_deadline(time_machine)
    overdue = tasks_in_every_state["overdue_first"]
    assert fast({"id": overdue})["status"]["state"] == "failed"
    for name, task_id in tasks_in_every_state.items():
        if name != "overdue_second":
            served = fast({"id": task_id})
            assert served is not None and (served["id"], served["kind"]) == (task_id, "task")
    resolved = tasks_in_every_state["resolved"]
    assert fast({"id": resolved, "historyLength": 0}) == fast({"id": resolved})
    assert fast({"id": resolved, "historyLength": 2}) == fast({"id": resolved})  # no history

    open_task = tasks_in_every_state["open_empty"]
    before = fast({"id": open_task})
    contribute(make_agent(), Task.objects.get(pk=open_task))
    after = fast({"id": open_task})
    assert contributions(after) == contributions(before) + 1
    assert strict(
        reply(rpc("tasks/get", {"id": open_task}), fast=True, headers=V0_3_HEADERS)
    ) == strict(adapter(open_task))


def test_an_evaluated_task_is_answered_from_memory_and_an_open_one_never(
    tasks_in_every_state, make_agent, contribute
):
    """An evaluated task never changes again, so its second GetTask needs no database; an open
    task's count changes with every contribution, so each GetTask reads it afresh."""

    def get(task_id: str) -> dict[str, Any]:
        return reply(rpc("GetTask", {"id": task_id}), fast=True)[1]["result"]

    resolved, open_task = tasks_in_every_state["resolved"], tasks_in_every_state["open_empty"]
    first = get(resolved)
    kept = EVALUATED_FORMS["1.0"].get(uuid.UUID(resolved))
    assert kept is not None and strictly(kept) == strictly(first)
    assert strict(reply(rpc("GetTask", {"id": resolved}), fast=True)) == strict(
        reply(rpc("GetTask", {"id": resolved}), fast=False)
    )

    before = get(open_task)
    assert EVALUATED_FORMS["1.0"].get(uuid.UUID(open_task)) is None
    contribute(make_agent(), Task.objects.get(pk=open_task))
    assert contributions(get(open_task)) == contributions(before) + 1


def test_the_evaluated_forms_kept_stay_within_their_bound():
    forms = evaluated_forms(max_chars=1300)  # three of the forms below, with their overhead
    keys = [uuid.uuid4() for _ in range(4)]
    for key in keys[:3]:
        forms.keep(key, "x" * 300)
    assert forms.get(keys[0]) is not None  # read last: kept when the fourth comes
    forms.keep(keys[3], "y" * 300)
    assert forms.get(keys[1]) is None
    assert [forms.get(key) is not None for key in (keys[0], keys[2], keys[3])] == [True] * 3
    forms.keep(uuid.uuid4(), "z" * 1300)  # larger than the whole bound: not kept, nothing dropped
    assert all(forms.get(key) is not None for key in (keys[0], keys[2], keys[3]))


def walks(task_ids: dict[str, str]) -> list[tuple[Any, None, None]]:
    """Every page of four walks, each page asked with its own filter and with two others."""
    requests: list[tuple[Any, None, None]] = []
    for status, page_size in ((None, 1), (None, 3), ("TASK_STATE_WORKING", 1)):
        for token in page_tokens(status, page_size):
            for asked in ({"status": status} if status else {}, {"status": "TASK_STATE_FAILED"}):
                params = {**asked, "pageSize": page_size, "pageToken": token}
                requests.append((rpc("ListTasks", params), None, None))
    return requests


@pytest.mark.django_db(transaction=True)
@postgres_only()
def test_the_pool_reads_answer_every_request_as_the_sdk_dispatcher_does(
    tasks_in_every_state, make_agent, time_machine
):
    """The ASGI app's reads on the event loop (`a2a_gateway.read_connections`), on one loop as under
    uvicorn; committed rows, since the pool's connections are not the test's."""
    requests = corpus(tasks_in_every_state, make_agent().token) + walks(tasks_in_every_state)
    past_the_second_deadline(time_machine)
    overdue = tasks_in_every_state["overdue_first"]

    async def both_ways() -> None:
        try:
            served = await fast_read(
                "GetTask", rpc("GetTask", {"id": overdue}), 1, read_connections.POOL_SOURCE
            )
            # Open past its deadline: evaluated first, on Django's thread, then read again.
            assert json.loads(served or b"")["result"]["status"]["state"] == "TASK_STATE_FAILED"
            for index, (document, headers, raw) in enumerate(requests):
                answers = {}
                for fast in (True, False) if index % 2 else (False, True):
                    answer = await a2a_reply(
                        path="/api/a2a",
                        headers=headers if headers is not None else HEADERS,
                        body=raw if raw is not None else json.dumps(document).encode(),
                        origin="http://testserver",
                        fast_reads=fast,
                        reads=read_connections.POOL_SOURCE,
                    )
                    answers[fast] = answered(answer.status, answer.body, answer.headers)
                assert strict(answers[True]) == strict(answers[False]), (document, headers, raw)
            for task_id in tasks_in_every_state.values():
                for method in ("GetTask", "tasks/get"):
                    served = await fast_read(
                        method, rpc(method, {"id": task_id}), 1, read_connections.POOL_SOURCE
                    )
                    assert served is not None and json.loads(served)["result"]["id"] == task_id
            for params in ({}, {"pageSize": 2}, {"status": "TASK_STATE_FAILED", "pageSize": 100}):
                listed = await fast_read(
                    "ListTasks", rpc("ListTasks", params), 1, read_connections.POOL_SOURCE
                )
                assert listed is not None and json.loads(listed)["result"]["tasks"]
        finally:
            await read_connections.close()

    async_to_sync(both_ways)()


REST_HEADERS = {"a2a-version": "1.0"}
REST_STATUSES = [
    None,
    "TASK_STATE_WORKING",
    "working",
    "completed",
    "TASK_STATE_FAILED",
    "TASK_STATE_UNSPECIFIED",
    "UNRECOGNIZED",
    "TASK_STATE_BOGUS",
    "Working",
    "3",
    "0",
]
REST_PAGE_SIZES = [None, 1, 2, 50, 51, 100, 0, 101, -1, "x"]
RestRequest = tuple[str, str, dict[str, Any], dict[str, str] | None]


async def rest_answer(
    method: str,
    path: str,
    query: dict[str, Any],
    headers: dict[str, str] | None,
    *,
    fast: bool,
    reads: DjangoSource = DJANGO_SOURCE,
) -> tuple[int, Any, Any, str]:
    """An HTTP+JSON answer as a client reads it, with its content type."""

    async def no_body():
        yield b""

    answer = await rest_reply(
        method=method,
        path=path,
        query_string=urlencode(query, doseq=True).encode(),
        headers=headers if headers is not None else REST_HEADERS,
        body=no_body(),
        origin="http://testserver",
        fast_reads=fast,
        reads=reads,
    )
    return (*answered(answer.status, answer.body, answer.headers), answer.content_type)


def rest_list_tokens(status: str | None, page_size: int) -> list[str]:
    """Every page token of an HTTP+JSON walk, as the SDK's REST dispatcher issues them."""
    tokens, token = [], ""
    while True:
        query: dict[str, Any] = {"pageSize": page_size, "pageToken": token}
        if status is not None:
            query["status"] = status
        _, body, _, _ = async_to_sync(rest_answer)("GET", "/api/a2a/tasks", query, None, fast=False)
        token = body["nextPageToken"]
        if not token:
            return tokens
        tokens.append(token)


def rest_corpus(task_ids: dict[str, str]) -> list[RestRequest]:
    """(method, path, query, headers) for every HTTP+JSON read; the overdue task first."""
    ids = list(task_ids.values())
    unknown = str(uuid.UUID(int=7))
    tasks = "/api/a2a/tasks"
    requests: list[RestRequest] = [
        ("GET", f"{tasks}/{task_ids['overdue_first']}", {}, None),
        ("GET", tasks, {"pageSize": 3}, None),
    ]
    for task_id in [*ids, ids[0].upper(), "{" + ids[1] + "}", unknown, "not-a-uuid"]:
        for extra in (
            {},
            {"tenant": "t"},
            {"historyLength": 0},
            {"historyLength": -1},
            {"historyLength": "x"},
            {"x": 1},
            {"id": unknown},
            {"id": ids[2]},
        ):
            requests.append(("GET", f"{tasks}/{task_id}", extra, None))
    requests.append(("HEAD", f"{tasks}/{ids[0]}", {}, None))
    for status in REST_STATUSES:
        for page_size in REST_PAGE_SIZES:
            query: dict[str, Any] = {}
            if status is not None:
                query["status"] = status
            if page_size is not None:
                query["pageSize"] = page_size
            for extra in ({}, {"includeArtifacts": "true"}, {"historyLength": 1}):
                requests.append(("GET", tasks, {**query, **extra}, None))
    for extra in (
        {"contextId": ids[0]},
        {"contextId": unknown},
        {"contextId": "nope"},
        {"statusTimestampAfter": "2026-06-01T12:00:00Z"},
        {"statusTimestampAfter": "yesterday"},
        {"tenant": "t"},
        {"pageToken": "garbage"},
        {"includeArtifacts": "false"},
        {"includeArtifacts": "yes"},
        {"status": ["working", "completed"]},
        {"pageSize": ["x", "2"]},
        {"unknownField": "1"},
    ):
        requests.append(("GET", tasks, {"pageSize": 2, **extra}, None))
    for version in (None, "0.3", "2.0"):
        headers = {} if version is None else {"a2a-version": version}
        requests.append(("GET", f"{tasks}/{ids[0]}", {}, headers))
        requests.append(("GET", tasks, {}, headers))
    return requests


def rest_walks() -> list[RestRequest]:
    """Every page of three walks, each page asked with its own filter and with two others."""
    requests: list[RestRequest] = []
    for status, page_size in ((None, 1), (None, 3), ("working", 1), ("TASK_STATE_COMPLETED", 1)):
        for token in rest_list_tokens(status, page_size):
            for asked in ({"status": status} if status else {}, {}, {"status": "failed"}):
                query = {**asked, "pageSize": page_size, "pageToken": token}
                requests.append(("GET", "/api/a2a/tasks", query, None))
    return requests


async def rest_both_ways(requests: list[RestRequest], reads: DjangoSource) -> None:
    for index, (method, path, query, headers) in enumerate(requests):
        # Alternate which path goes first, so each meets an overdue task open at some point.
        answers = {
            fast: await rest_answer(method, path, query, headers, fast=fast, reads=reads)
            for fast in ((True, False) if index % 2 else (False, True))
        }
        assert strict(answers[True]) == strict(answers[False]), (method, path, query, headers)


def test_the_fast_path_answers_every_rest_read_as_the_sdk_rest_dispatcher_does(
    tasks_in_every_state, time_machine
):
    requests = rest_corpus(tasks_in_every_state) + rest_walks()
    past_the_second_deadline(time_machine)
    assert len(requests) > 400
    async_to_sync(rest_both_ways)(requests, DJANGO_SOURCE)


def test_rest_reads_of_rendered_tasks_take_the_fast_path(tasks_in_every_state, time_machine):
    """As over JSON-RPC: the corpus above would pass if the fast path never answered."""

    def fast(path: str, query: dict[str, Any]) -> tuple[int, Any, Any, str]:
        return async_to_sync(rest_answer)("GET", path, query, None, fast=True)

    def served(model: Any, query: dict[str, Any], task_id: str | None = None) -> bytes | None:
        answer = async_to_sync(fast_rest_read)(
            model(), QueryParams(query), task_id, query.get("status")
        )
        return None if answer is None else answer.body

    past_the_second_deadline(time_machine)
    overdue = tasks_in_every_state["overdue_first"]
    evaluated = json.loads(served(GetTaskRequest, {}, overdue) or b"")
    assert evaluated["status"]["state"] == "TASK_STATE_FAILED"
    for name, task_id in tasks_in_every_state.items():
        if name != "overdue_second":
            body = served(GetTaskRequest, {}, task_id)
            assert body is not None and json.loads(body)["id"] == task_id
    for query in ({}, {"pageSize": 2}, {"status": "TASK_STATE_FAILED", "pageSize": 100}):
        listed = served(ListTasksRequest, query)
        assert listed is not None and json.loads(listed)["tasks"]
    status, page, _, content_type = fast("/api/a2a/tasks", {})
    assert (status, content_type) == (200, "application/a2a+json")
    assert [task["status"]["state"] for task in page["tasks"]].count("TASK_STATE_WORKING") == 2


@pytest.mark.django_db(transaction=True)
@postgres_only()
def test_the_pool_reads_answer_every_rest_read_as_the_sdk_rest_dispatcher_does(
    tasks_in_every_state, time_machine
):
    """HTTP+JSON's reads from the ASGI app's pool, as JSON-RPC's above."""
    requests = rest_corpus(tasks_in_every_state) + rest_walks()
    past_the_second_deadline(time_machine)

    async def both_ways() -> None:
        try:
            await rest_both_ways(requests, read_connections.POOL_SOURCE)
            for task_id in tasks_in_every_state.values():
                served = await fast_rest_read(
                    GetTaskRequest(), QueryParams(), task_id, None, read_connections.POOL_SOURCE
                )
                assert served is not None and json.loads(served.body)["id"] == task_id
            listed = await fast_rest_read(
                ListTasksRequest(),
                QueryParams("status=TASK_STATE_FAILED"),
                None,
                "TASK_STATE_FAILED",
                read_connections.POOL_SOURCE,
            )
            assert listed is not None and json.loads(listed.body)["tasks"]
        finally:
            await read_connections.close()

    async_to_sync(both_ways)()
