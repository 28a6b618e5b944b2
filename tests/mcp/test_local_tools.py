"""SPEC §10, local: each tool's arguments and answers through `cairn_mcp.py` over stdio — Cairn's
refusals as MCP tool errors with their §6 code, the local-only tools, and the participant card."""

from __future__ import annotations

import json
import socket
import stat
import uuid
from datetime import timedelta

import anyio
import time_machine
from a2a.types import AgentCard
from google.protobuf.json_format import ParseDict

from agents.models import Agent
from core.canonical import canonical_digest
from core.clock import parse_instant
from tasks.models import Task
from tests.factories import SOURCE, contribution_report, open_task_request
from tests.ledger.conftest import receipt_verified
from tests.mcp.conftest import call, connected

LOCAL_TOOLS = {
    "cairn_a2a_tasks",
    "cairn_a2a_task",
    "cairn_a2a_contribute",
    "cairn_a2a_create_task",
    "cairn_a2a_mine",
    "cairn_a2a_preview_task",
    "cairn_a2a_card",
    "cairn_local_status",
    "cairn_local_save_card",
    "cairn_local_set_consent",
}
PARTICIPANT = "urn:cairn:participant:v1"


def run(server, steps):
    """Run `steps(client)` against one local server and return what it returns."""

    async def scenario():
        async with connected(server) as (client,):
            return await steps(client)

    return anyio.run(scenario)


def post(client, request):
    return call(
        client,
        "cairn_a2a_create_task",
        {"request": request, "public_input_digest": canonical_digest(request)},
    )


def send_report(client, task_id, report):
    arguments = {
        "task_id": task_id,
        "report": report,
        "public_output_digest": canonical_digest(report),
    }
    return call(client, "cairn_a2a_contribute", arguments)


def test_it_offers_exactly_the_tools_of_the_spec(local_server):
    async def steps(client):
        return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in run(local_server(), steps)}

    assert set(tools) == LOCAL_TOOLS
    assert all(tool.input_schema["additionalProperties"] is False for tool in tools.values())
    request_schema = tools["cairn_a2a_preview_task"].input_schema["properties"]["request"]
    assert set(request_schema["required"]) == set(open_task_request())
    assert "$ref" not in json.dumps(tools["cairn_a2a_create_task"].input_schema)
    assert tools["cairn_a2a_contribute"].input_schema["required"] == ["task_id", "report"]


def test_status_reports_an_unreachable_server(local_server):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = local_server("offline", CAIRN_URL=dead)

    status = run(server, lambda client: call(client, "cairn_local_status")).data

    assert status["cairn_url"] == dead and status["server_reachable"] is False
    assert (status["has_token"], status["consent"], status["card_saved"]) == (False, None, False)


def test_the_preview_shows_shape_problems_found_locally(local_server):
    request = open_task_request(title="short", min_independent=4, max_contributors=3, extra="x")
    del request["budget"]

    preview = run(
        local_server(), lambda client: call(client, "cairn_a2a_preview_task", {"request": request})
    ).data

    assert preview["request"] == request
    assert preview["public_input_digest"] == canonical_digest(request)
    paths = {issue["path"] for issue in preview["issues"]}
    assert {"request.title", "request.budget", "request.extra"} <= paths
    assert {issue["code"] for issue in preview["issues"]} == {"invalid_payload"}


def test_cairns_refusals_come_back_as_tool_errors_with_their_code(
    local_server, make_agent, post_task, past_task
):
    closed = past_task([])
    others = post_task(make_agent())
    poster = local_server("poster")
    report = contribution_report()

    async def steps(client):
        await call(client, "cairn_local_set_consent", {"public_output": True})
        outside = open_task_request(sources=["https://example.com/page"])
        own = await post(client, open_task_request())
        return {
            "source_not_allowed": await post(client, outside),
            "deadline_out_of_range": await post(
                client, open_task_request(deadline="2020-01-01T00:00:00.000Z")
            ),
            "invalid_payload": await post(client, open_task_request(title="short")),
            "own_task": await send_report(client, own.data["task"]["id"], report),
            "source_not_in_task": await send_report(
                client,
                str(others.pk),
                {**report, "source_urls": ["https://docs.python.org/3/library/os.html"]},
            ),
            "task_closed": await send_report(client, str(closed.pk), report),
            "not_found": await send_report(client, str(uuid.uuid4()), report),
        }

    answers = run(poster, steps)

    for code, answer in answers.items():
        assert answer.is_error and answer.code == code, (code, answer.data)
        assert set(answer.data["error"]) == {"code", "message", "issues"}
    issue = answers["source_not_allowed"].data["error"]["issues"][0]
    assert issue == {
        "path": "request.sources[0]",
        "code": "source_not_allowed",
        "message": issue["message"],
    }
    assert (
        Task.objects.count() == 3
    )  # past, others and the poster's own: no refused task was stored


def test_caps_are_refused_with_their_code(local_server, settings):
    settings.CAIRN_OPEN_TASKS_PER_AGENT = 1

    async def steps(client):
        await call(client, "cairn_local_set_consent", {"public_output": True})
        first = await post(client, open_task_request())
        return first, await post(
            client, open_task_request(title="A second question about the same sources")
        )

    first, second = run(local_server(), steps)

    assert not first.is_error and second.code == "open_task_cap"


def test_a_contribution_is_sealed_until_the_deadline_but_its_author_reads_it(
    local_server, make_agent, post_task
):
    task = post_task(make_agent())
    report = contribution_report(verdict="source_contradicted")

    async def steps(client):
        await call(client, "cairn_local_set_consent", {"public_output": True})
        sent = await send_report(client, str(task.pk), report)
        return (
            sent,
            await call(client, "cairn_a2a_task", {"task_id": str(task.pk)}),
            await call(client, "cairn_a2a_mine"),
        )

    sent, read, mine = run(local_server(), steps)

    assert sent.data["receipt"]["report_digest"] == canonical_digest(report)
    assert read.data["contributions_received"] == 1 and read.data["evaluation"] is None
    assert "source_contradicted" not in json.dumps(read.data)
    assert mine.data["contributions"] == [
        {"task_id": str(task.pk), "receipt": sent.data["receipt"], "report": report}
    ]


def test_mine_without_a_token_is_empty_and_sends_nothing(local_server):
    server = local_server("fresh")

    mine = run(server, lambda client: call(client, "cairn_a2a_mine"))

    assert mine.data == {"tasks": [], "contributions": []}
    assert Agent.objects.count() == 0 and not (server.home / "token").exists()


BAD_ARGUMENTS = [
    ("cairn_a2a_tasks", {"page_size": 0}),
    ("cairn_a2a_tasks", {"status": "open", "cursor": ""}),
    ("cairn_a2a_tasks", {"page_token": "forged"}),
    ("cairn_a2a_task", {}),
    ("cairn_a2a_preview_task", {"request": "a title"}),
    ("cairn_a2a_create_task", {"request": {}}),
    ("cairn_a2a_contribute", {"task_id": "x", "report": {**contribution_report(), "approval": {}}}),
    ("cairn_a2a_card", {"name": "x"}),
    ("cairn_local_set_consent", {"public_output": "yes"}),
    ("cairn_local_save_card", {"card": []}),
    ("cairn_no_such_tool", {}),
]


def test_bad_arguments_are_invalid_query(local_server):
    async def steps(client):
        return [await call(client, name, arguments) for name, arguments in BAD_ARGUMENTS]

    answers = run(local_server(), steps)

    for (name, arguments), answer in zip(BAD_ARGUMENTS, answers, strict=True):
        assert answer.code == "invalid_query", (name, arguments, answer.data)


def test_the_participant_card(local_server):
    server = local_server("card")
    wallet = "0x52908400098527886E0F7030069857D2E4169EE7"

    async def steps(client):
        card = await call(
            client,
            "cairn_a2a_card",
            {
                "name": "Doc reader",
                "description": "Reads Python docs.",
                "skills": ["Python docs", "npm"],
                "wallet": wallet,
            },
        )
        later = await call(
            client, "cairn_a2a_card", {"name": "Another", "description": "Not saved."}
        )
        save = await call(client, "cairn_local_save_card", {"card": later.data})
        return card, later, save, await call(client, "cairn_local_status")

    card, later, save, status = run(server, steps)

    data = card.data
    ParseDict(data, AgentCard())  # the SDK reads it as an Agent Card
    assert data["supportedInterfaces"] == []
    assert data["capabilities"]["extensions"] == [
        {"uri": PARTICIPANT, "description": data["capabilities"]["extensions"][0]["description"],
         "params": {"self_reported": True, "wallet": wallet}}
    ]  # fmt: skip
    assert [skill["name"] for skill in data["skills"]] == ["Python docs", "npm"]
    assert not {"securitySchemes", "securityRequirements", "signatures"} & set(data)
    assert "wallet" not in later.data["capabilities"]["extensions"][0]["params"]
    saved = server.home / "card.json"
    assert json.loads(saved.read_text()) == data  # the first card, kept
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    assert save.code == "card_exists"
    assert status.data["card_saved"] is True


def test_a_card_is_saved_only_where_the_person_chose(local_server, tmp_path):
    server = local_server("unchosen", CAIRN_HOME=None, HOME=str(tmp_path / "person"))

    async def steps(client):
        card = await call(
            client, "cairn_a2a_card", {"name": "Doc reader", "description": "Reads docs."}
        )
        before = await call(client, "cairn_local_status")
        saved = await call(client, "cairn_local_save_card", {"card": card.data})
        return before, saved, await call(client, "cairn_local_status")

    before, saved, after = run(server, steps)

    home = tmp_path / "person" / ".cairn"
    assert before.data["home"] == str(home) and before.data["card_saved"] is False
    assert saved.data == {"saved": str(home / "card.json")}
    assert after.data["card_saved"] is True


KEY_LIKE = {
    "hex private key": "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318",
    "PEM": "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIIaw\n-----END EC PRIVATE KEY-----",
    "12 words": "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about",
    "24 words": "legal winner thank year wave sausage worth useful legal winner thank yellow " * 2,
    "cairn token": "cairn_" + "A1b2C3d4" * 6,
    "github token": "ghp_" + "a1B2c3D4e5" * 4,
    "WIF": "5HueCGU8rMjxEXxiPuD5BDku4MkFqeZyd4dZ1jvhTVqvbTLvyTJ",
}


def test_key_like_values_are_refused_and_nothing_is_saved(local_server):
    server = local_server("keys")
    cases = [
        (field, kind)
        for field in ("description", "skills", "wallet", "name")
        for kind, value in KEY_LIKE.items()
        if not (field == "wallet" and len(value) > 128)
    ]

    async def steps(client):
        answers = []
        for field, kind in cases:
            value = KEY_LIKE[kind]
            arguments = {"name": "Doc reader", "description": "Reads docs."}
            arguments[field] = (
                [value] if field == "skills" else value[:100] if field == "name" else value
            )
            answers.append(await call(client, "cairn_a2a_card", arguments))
        return answers

    answers = run(server, steps)

    for (field, kind), answer in zip(cases, answers, strict=True):
        assert answer.code == "private_content", (field, kind, answer.data)
        assert KEY_LIKE[kind][:20] not in json.dumps(answer.data)  # never echoed
    assert not (server.home / "card.json").exists()


def test_ordinary_descriptions_and_public_addresses_pass(local_server):
    prose = (
        "Reads the python docs then checks every claim against the source code before voting on it"
    )
    addresses = [
        "0x52908400098527886E0F7030069857D2E4169EE7",
        "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq",
        "7EcDhSYGxXyscszYEp35KHN8vvw3svAuLKTzXwCFLtV",
    ]

    async def steps(client):
        return [
            await call(
                client, "cairn_a2a_card", {"name": "Reader", "description": prose, "wallet": wallet}
            )
            for wallet in addresses
        ]

    answers = run(local_server("plain"), steps)

    assert not any(answer.is_error for answer in answers), [answer.data for answer in answers]


def test_a_saved_card_must_be_a_participant_card_without_secrets(local_server):
    async def steps(client):
        card = (
            await call(client, "cairn_a2a_card", {"name": "Reader", "description": "Reads docs."})
        ).data
        with_interface = {
            **card,
            "supportedInterfaces": [{"url": "https://x.example/a2a", "protocolBinding": "JSONRPC"}],
        }
        secret = {**card, "description": KEY_LIKE["hex private key"]}
        return [
            await call(client, "cairn_local_save_card", {"card": {"name": "x", "bogus": 1}}),
            await call(client, "cairn_local_save_card", {"card": with_interface}),
            await call(client, "cairn_local_save_card", {"card": {**card, "capabilities": {}}}),
            await call(client, "cairn_local_save_card", {"card": secret}),
        ]

    answers = run(local_server("savecheck", CAIRN_HOME=None), steps)

    assert [answer.code for answer in answers] == ["invalid_query"] * 3 + ["private_content"]


def test_consent_is_recorded_and_can_be_withdrawn(local_server):
    server = local_server("consent")

    async def steps(client):
        given = await call(client, "cairn_local_set_consent", {"public_output": True})
        withdrawn = await call(client, "cairn_local_set_consent", {"public_output": False})
        return given, withdrawn, await call(client, "cairn_local_status")

    given, withdrawn, status = run(server, steps)

    assert given.data["consent"]["public_output"] is True
    assert withdrawn.data["consent"]["public_output"] is False
    assert status.data["consent"] == withdrawn.data["consent"]
    parse_instant(status.data["consent"]["recorded_at"])


def test_a_contribution_to_a_task_past_its_deadline_is_task_closed(
    local_server, make_agent, post_task
):
    task = post_task(make_agent())

    async def steps(client):
        await call(client, "cairn_local_set_consent", {"public_output": True})
        with time_machine.travel(task.deadline + timedelta(seconds=1)):
            return await send_report(
                client, str(task.pk), contribution_report(source_urls=[SOURCE])
            )

    assert run(local_server(), steps).code == "task_closed"


def test_every_signed_receipt_is_kept_under_cairn_home(local_server, make_agent, post_task, http):
    task = post_task(make_agent())
    server = local_server()

    async def steps(client):
        await call(client, "cairn_local_set_consent", {"public_output": True})
        return await send_report(client, str(task.pk), contribution_report())

    sent = run(server, steps)

    receipt = sent.data["receipt"]
    receipt_verified(receipt, http)
    kept = server.home / "receipts" / f"{receipt['contribution_id']}.json"
    assert json.loads(kept.read_text()) == receipt
    assert kept.stat().st_mode & 0o777 == 0o600
