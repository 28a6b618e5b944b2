"""SPEC §10, hosted: `/api/mcp` through the official MCP client over streamable HTTP — two read
tools answering with the same public views as every other door, no identity, no write tool."""

from __future__ import annotations

import tomllib

import anyio
import httpx
import pytest
from django.conf import settings as django_settings
from mcp import Client

from agents.models import AuditEntry
from tasks.models import Task
from tasks.rendered import task_view
from tasks.selectors import task_get
from tests.factories import open_task_request
from tests.hostile import HOSTILE, nested, says_nothing_of_python
from tests.mcp.conftest import call

READ_TOOLS = {"cairn_a2a_tasks", "cairn_a2a_task"}


@pytest.fixture
def hosted(live_url) -> str:
    return live_url + "/api/mcp"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_it_offers_exactly_the_two_read_tools(hosted, mode):
    async def scenario():
        async with Client(hosted, mode=mode) as client:
            return (await client.list_tools()).tools

    tools = anyio.run(scenario)

    assert {tool.name for tool in tools} == READ_TOOLS
    for tool in tools:
        assert tool.annotations.read_only_hint is True
        assert tool.input_schema["type"] == "object"
        assert tool.input_schema["additionalProperties"] is False
    schema = next(tool for tool in tools if tool.name == "cairn_a2a_tasks").input_schema[
        "properties"
    ]
    assert schema["status"]["enum"] == ["open", "completed", "failed"]
    assert (schema["page_size"]["minimum"], schema["page_size"]["maximum"]) == (1, 50)


def test_it_names_itself_with_cairns_own_version(hosted):
    async def scenario():
        async with Client(hosted) as client:
            return client.server_info

    info = anyio.run(scenario)

    with open(django_settings.BASE_DIR / "pyproject.toml", "rb") as file:
        version = tomllib.load(file)["project"]["version"]
    assert (info.name, info.version) == ("cairn", version)


def test_it_pages_through_open_tasks_newest_first(hosted, make_agent, post_task):
    posted = [post_task(make_agent()) for _ in range(3)]

    async def scenario():
        async with Client(hosted) as client:
            first = await call(client, "cairn_a2a_tasks", {"page_size": 2})
            second = await call(
                client,
                "cairn_a2a_tasks",
                {"page_size": 2, "page_token": first.data["next_page_token"]},
            )
            default = await call(client, "cairn_a2a_tasks")
            return first, second, default

    first, second, default = anyio.run(scenario)

    newest_first = [task_view(task) for task in reversed(posted)]
    assert not first.is_error and not second.is_error
    assert first.data["tasks"] == newest_first[:2] and first.data["next_page_token"]
    assert second.data == {"tasks": newest_first[2:], "next_page_token": ""}
    assert default.data == {"tasks": newest_first, "next_page_token": ""}


def test_it_filters_by_status_and_reads_one_evaluated_task(
    hosted, make_agent, post_task, past_task
):
    resolved = past_task(["source_supported", "source_supported"])
    unresolved = past_task([])
    still_open = post_task(make_agent())

    async def scenario():
        async with Client(hosted) as client:
            lists = {
                status: await call(client, "cairn_a2a_tasks", {"status": status})
                for status in ("open", "completed", "failed")
            }
            return lists, await call(client, "cairn_a2a_task", {"task_id": str(resolved.pk)})

    lists, one = anyio.run(scenario)

    assert [view["id"] for view in lists["open"].data["tasks"]] == [str(still_open.pk)]
    assert [view["id"] for view in lists["completed"].data["tasks"]] == [str(resolved.pk)]
    assert [view["id"] for view in lists["failed"].data["tasks"]] == [str(unresolved.pk)]
    assert one.data == task_view(task_get(resolved.pk))
    assert (one.data["state"], one.data["outcome"], one.data["verdict"]) == (
        "evaluated",
        "resolved",
        "source_supported",
    )
    assert len(one.data["evaluation"]["contributions"]) == 2


def test_an_unknown_task_is_not_found(hosted):
    async def scenario():
        async with Client(hosted) as client:
            return [
                await call(client, "cairn_a2a_task", {"task_id": task_id})
                for task_id in ("00000000-0000-4000-8000-000000000000", "not-a-uuid")
            ]

    answers = anyio.run(scenario)

    assert [answer.code for answer in answers] == ["not_found", "not_found"]
    assert set(answers[0].data["error"]) == {"code", "message", "issues"}


@pytest.mark.parametrize(
    "name, arguments",
    [
        ("cairn_a2a_tasks", {"page_size": 0}),
        ("cairn_a2a_tasks", {"page_size": 51}),
        ("cairn_a2a_tasks", {"page_size": "20"}),
        ("cairn_a2a_tasks", {"status": "evaluated"}),
        ("cairn_a2a_tasks", {"mode": "open"}),
        ("cairn_a2a_tasks", {"page_token": "forged"}),
        ("cairn_a2a_task", {}),
        ("cairn_a2a_task", {"task_id": ""}),
    ],
)
def test_bad_arguments_are_invalid_query(hosted, name, arguments):
    async def scenario():
        async with Client(hosted) as client:
            return await call(client, name, arguments)

    answer = anyio.run(scenario)

    assert answer.code == "invalid_query"


def test_a_page_token_only_works_with_its_own_status(hosted, make_agent, post_task):
    for _ in range(2):
        post_task(make_agent())

    async def scenario():
        async with Client(hosted) as client:
            first = await call(client, "cairn_a2a_tasks", {"page_size": 1})
            token = first.data["next_page_token"]
            return await call(
                client, "cairn_a2a_tasks", {"status": "completed", "page_token": token}
            )

    assert anyio.run(scenario).code == "invalid_query"


def test_there_is_no_write_tool(hosted):
    async def scenario():
        async with Client(hosted) as client:
            return [
                await call(
                    client,
                    name,
                    {"request": open_task_request(), "public_input_digest": "sha256:" + "0" * 64},
                )
                for name in (
                    "cairn_a2a_create_task",
                    "cairn_a2a_contribute",
                    "cairn_local_set_consent",
                )
            ]

    answers = anyio.run(scenario)

    assert all(answer.code == "invalid_query" for answer in answers)
    assert Task.objects.count() == 0 and AuditEntry.objects.count() == 0


def _post(live_url: str, host: str, origin: str | None = None) -> httpx.Response:
    headers = {
        "Host": host,
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    if origin:
        headers["Origin"] = origin
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    return httpx.post(live_url + "/api/mcp", json=body, headers=headers, timeout=20)


def test_it_answers_the_sites_own_hosts_and_loopback_on_any_port(live_url, settings):
    settings.CAIRN_SITE_URL = "https://cairn.example.org"
    settings.ALLOWED_HOSTS = [".example.net"]

    for host in (
        "cairn.example.org",
        "cairn.example.org:443",
        "mcp.example.net",
        "127.0.0.1",
        "127.0.0.1:8123",
        "localhost:9",
        "[::1]:8000",
    ):
        response = _post(live_url, host)
        assert response.status_code == 200, host
        assert {tool["name"] for tool in response.json()["result"]["tools"]} == READ_TOOLS


def test_it_refuses_a_host_the_site_does_not_serve(live_url, settings):
    settings.CAIRN_SITE_URL = "https://cairn.example.org"

    for host in ("evil.example.com", "cairn.example.org.evil.com", ""):
        assert _post(live_url, host).status_code == 421, host


def test_it_takes_only_post(live_url):
    for method in ("GET", "DELETE"):
        response = httpx.request(
            method, live_url + "/api/mcp", headers={"Accept": "text/event-stream"}, timeout=20
        )
        assert (response.status_code, response.headers["Allow"]) == (405, "POST")
        assert response.json()["error"]["code"] == "method_not_allowed"


def test_bytes_that_are_not_json_are_a_json_rpc_parse_error(live_url, subtests):
    """The same rule as every door (SPEC §8.2): deeper than 64 levels or a lone surrogate is no
    JSON, whatever Python's or the SDK's parser would make of it."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    for name, content in {**HOSTILE, "65 levels": nested(65)}.items():
        with subtests.test(name=name):
            response = httpx.post(live_url + "/api/mcp", content=content, headers=headers)
            assert response.status_code == 400
            assert response.json()["error"]["code"] == -32700
            assert says_nothing_of_python(response.content)


def test_without_the_asgi_lifespan_it_says_what_is_missing():
    from mcp_door.asgi import McpEndpoint

    async def scenario():
        transport = httpx.ASGITransport(
            app=McpEndpoint()
        )  # no lifespan: the session manager never ran
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1:8000"
        ) as client:
            return await client.post(
                "/api/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            )

    response = anyio.run(scenario)

    assert response.status_code == 503 and "lifespan" in response.text
