"""SPEC §10, local: the whole path through `cairn_mcp.py` over stdio against a live Cairn —
status, consent, preview, create, sealed contributions from other homes, mine, and the evaluated
task — through the official MCP client, with writes going over A2A."""

from __future__ import annotations

import stat
from datetime import timedelta

import anyio
import time_machine
from mcp import Client

from agents.models import Agent, AuditEntry, Door
from core.canonical import canonical_digest
from core.clock import parse_instant
from tasks.models import Task
from tasks.rendered import task_view
from tasks.selectors import task_get
from tests.factories import SOURCE, contribution_report, open_task_request, task_request
from tests.mcp.conftest import LOCAL_VERSION_CLIENT, call, connected


def test_the_whole_path(local_server):
    alice, bob, carol = local_server("alice"), local_server("bob"), local_server("carol")
    report = contribution_report(source_urls=[SOURCE])

    async def scenario():
        async with connected(alice, bob, carol) as (a, b, c):
            found = {"status": await call(a, "cairn_local_status")}
            found["consent"] = await call(a, "cairn_local_set_consent", {"public_output": True})
            request = open_task_request()
            found["preview"] = await call(a, "cairn_a2a_preview_task", {"request": request})
            digest = found["preview"].data["public_input_digest"]
            found["created"] = await call(
                a, "cairn_a2a_create_task", {"request": request, "public_input_digest": digest}
            )
            task_id = found["created"].data["task"]["id"]
            for name, client, verdict in (
                ("bob", b, "source_supported"),
                ("carol", c, "source_supported"),
            ):
                mine = {**report, "verdict": verdict}
                preview = await call(
                    client, "cairn_a2a_contribute", {"task_id": task_id, "report": mine}
                )
                await call(client, "cairn_local_set_consent", {"public_output": True})
                found[name] = await call(
                    client,
                    "cairn_a2a_contribute",
                    {
                        "task_id": task_id,
                        "report": mine,
                        "public_output_digest": preview.data["public_output_digest"],
                    },
                )
                found[f"{name}_preview"] = preview
            found["alice_mine"] = await call(a, "cairn_a2a_mine")
            found["bob_mine"] = await call(b, "cairn_a2a_mine")
            found["open_read"] = await call(c, "cairn_a2a_task", {"task_id": task_id})
            # The deadline passes (for the server, which runs in this process; the clock of the
            # local servers does not matter): the next read evaluates the task.
            with time_machine.travel(parse_instant(request["deadline"]) + timedelta(seconds=1)):
                found["evaluated"] = await call(c, "cairn_a2a_task", {"task_id": task_id})
                found["completed"] = await call(c, "cairn_a2a_tasks", {"status": "completed"})
            found["status_after"] = await call(a, "cairn_local_status")
            return request, found

    request, found = anyio.run(scenario)

    assert not any(answer.is_error for answer in found.values()), {
        k: v.data for k, v in found.items() if v.is_error
    }
    status = found["status"].data
    assert status == {
        "cairn_url": alice.env["CAIRN_URL"],
        "home": str(alice.home),
        "has_token": False,
        "consent": None,
        "card_saved": False,
        "server_reachable": True,
    }
    consent = found["consent"].data["consent"]
    assert consent["public_output"] is True
    parse_instant(consent["recorded_at"])
    assert found["preview"].data == {
        "request": request,
        "public_input_digest": canonical_digest(request),
        "issues": [],
    }

    task = Task.objects.get()
    created = found["created"].data["task"]
    assert created["id"] == str(task.pk)
    assert task_request(created) == request and created["public_input_digest"] == canonical_digest(
        request
    )
    assert created["state"] == "open" and created["evaluation"] is None

    for name in ("bob", "carol"):
        preview, sent = found[f"{name}_preview"].data, found[name].data
        assert preview == {
            "report": report,
            "public_output_digest": canonical_digest(report),
            "form": "plain",  # the site lists no keypers
            "issues": [],
        }
        assert sent["task"]["id"] == str(task.pk)
        assert sent["receipt"]["task_id"] == str(task.pk)
        assert sent["receipt"]["report_digest"] == preview["public_output_digest"]
        assert sent["receipt"]["sealed_until"] == request["deadline"]

    assert [view["id"] for view in found["alice_mine"].data["tasks"]] == [str(task.pk)]
    assert found["alice_mine"].data["contributions"] == []
    bob_mine = found["bob_mine"].data
    assert bob_mine["tasks"] == [] and [item["report"] for item in bob_mine["contributions"]] == [
        report
    ]
    assert found["open_read"].data["contributions_received"] == 2
    assert "evaluation" in found["open_read"].data and found["open_read"].data["evaluation"] is None

    evaluated = found["evaluated"].data
    assert evaluated == task_view(task_get(task.pk))
    assert (evaluated["state"], evaluated["outcome"], evaluated["verdict"]) == (
        "evaluated",
        "resolved",
        "source_supported",
    )
    contributions = evaluated["evaluation"]["contributions"]
    assert [item["report"] for item in contributions] == [report, report]
    assert all(item["report_digest"] == canonical_digest(item["report"]) for item in contributions)
    assert [view["id"] for view in found["completed"].data["tasks"]] == [str(task.pk)]

    after = found["status_after"].data
    assert after["has_token"] is True and after["consent"] == consent
    token_file = alice.home / "token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert token_file.read_text().strip().startswith("cairn_")

    entries = AuditEntry.objects.order_by("at", "id")
    assert entries.count() == 3
    assert {(entry.door, entry.client) for entry in entries} == {(Door.A2A, LOCAL_VERSION_CLIENT)}


def test_a_write_without_consent_is_refused_and_sends_nothing(local_server, make_agent, post_task):
    task = post_task(make_agent())
    server = local_server("nobody")
    request = open_task_request()
    report = contribution_report()

    async def scenario():
        async with connected(server) as (client,):
            answers = [
                await call(
                    client,
                    "cairn_a2a_create_task",
                    {"request": request, "public_input_digest": canonical_digest(request)},
                ),
                await call(
                    client,
                    "cairn_a2a_contribute",
                    {
                        "task_id": str(task.pk),
                        "report": report,
                        "public_output_digest": canonical_digest(report),
                    },
                ),
            ]
            await call(client, "cairn_local_set_consent", {"public_output": True})
            await call(client, "cairn_local_set_consent", {"public_output": False})  # withdrawn
            answers.append(
                await call(
                    client,
                    "cairn_a2a_create_task",
                    {"request": request, "public_input_digest": canonical_digest(request)},
                )
            )
            answers.append(await call(client, "cairn_a2a_mine"))
            return answers

    *refused, mine = anyio.run(scenario)

    assert [answer.code for answer in refused] == ["consent_required"] * 3
    assert mine.data == {"tasks": [], "contributions": []}
    assert not (server.home / "token").exists()  # never registered: nothing was sent
    assert Task.objects.count() == 1 and task.contributions.count() == 0
    assert AuditEntry.objects.count() == 1  # the poster's own post only


def test_a_changed_request_or_report_is_refused_locally(local_server, make_agent, post_task):
    task = post_task(make_agent())
    server = local_server("careful")
    approved = open_task_request()
    report = contribution_report()

    async def scenario():
        async with connected(server) as (client,):
            await call(client, "cairn_local_set_consent", {"public_output": True})
            digest = (await call(client, "cairn_a2a_preview_task", {"request": approved})).data[
                "public_input_digest"
            ]
            report_digest = (
                await call(
                    client, "cairn_a2a_contribute", {"task_id": str(task.pk), "report": report}
                )
            ).data["public_output_digest"]
            changed = {**approved, "title": approved["title"] + " (edited)"}
            return [
                await call(
                    client,
                    "cairn_a2a_create_task",
                    {"request": changed, "public_input_digest": digest},
                ),
                await call(
                    client,
                    "cairn_a2a_contribute",
                    {
                        "task_id": str(task.pk),
                        "report": {**report, "verdict": "source_unclear"},
                        "public_output_digest": report_digest,
                    },
                ),
                await call(
                    client,
                    "cairn_a2a_create_task",
                    {"request": approved, "public_input_digest": "sha256:nope"},
                ),
            ]

    answers = anyio.run(scenario)

    assert [answer.code for answer in answers] == ["preview_changed"] * 3
    assert not (server.home / "token").exists()
    assert Agent.objects.count() == 1  # the poster only: no registration reached the server
    assert Task.objects.count() == 1 and task.contributions.count() == 0
    assert AuditEntry.objects.count() == 1  # the poster's own post only


def test_a_replayed_write_is_answered_from_its_record(local_server):
    server = local_server("retry")
    request = open_task_request()

    async def scenario():
        async with connected(server) as (client,):
            await call(client, "cairn_local_set_consent", {"public_output": True})
            arguments = {"request": request, "public_input_digest": canonical_digest(request)}
            return [await call(client, "cairn_a2a_create_task", arguments) for _ in range(2)]

    first, again = anyio.run(scenario)

    assert not first.is_error and again.data == first.data
    assert Task.objects.count() == 1


def test_both_doors_read_the_same(local_server, live_url, make_agent, post_task, past_task):
    evaluated = past_task(["source_supported", "source_contradicted"])
    still_open = post_task(make_agent())
    server = local_server("reader")
    reads = [
        ("cairn_a2a_task", {"task_id": str(evaluated.pk)}),
        ("cairn_a2a_task", {"task_id": str(still_open.pk)}),
        ("cairn_a2a_tasks", {}),
        ("cairn_a2a_tasks", {"status": "completed", "page_size": 5}),
        ("cairn_a2a_task", {"task_id": "00000000-0000-4000-8000-000000000000"}),
        ("cairn_a2a_tasks", {"page_size": 0}),
    ]

    async def scenario():
        async with connected(server) as (local,), Client(live_url + "/api/mcp") as hosted:
            local_tools = {tool.name: tool for tool in (await local.list_tools()).tools}
            hosted_tools = {tool.name: tool for tool in (await hosted.list_tools()).tools}
            answers = [(await call(local, *read), await call(hosted, *read)) for read in reads]
            return local_tools, hosted_tools, answers

    local_tools, hosted_tools, answers = anyio.run(scenario)

    for name in ("cairn_a2a_tasks", "cairn_a2a_task"):
        assert local_tools[name].input_schema == hosted_tools[name].input_schema
        assert local_tools[name].description == hosted_tools[name].description
    for (local_answer, hosted_answer), read in zip(answers, reads, strict=True):
        assert local_answer.is_error == hosted_answer.is_error, read
        if local_answer.is_error:
            assert local_answer.code == hosted_answer.code, read
        else:
            assert local_answer.data == hosted_answer.data, read
    assert answers[0][0].data["outcome"] == "contested"
