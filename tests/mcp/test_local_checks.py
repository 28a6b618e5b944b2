"""The local server runs the site's own checks on a report before anything is sent (SPEC §10,
§15.8): its shape, its sources against the task's, and the privacy screen. The contribute preview
lists what they find, and a send they refuse sends nothing; the issues are the site's own, word
for word, so a sealed report (which the site reads only at the deadline) is held to the same
rules before it leaves."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import anyio
import pytest

from agents.models import Agent
from core.canonical import canonical_digest
from core.errors import Refusal
from core.payloads import parse_payload
from tasks.models import Contribution
from tasks.payloads import ContributionPayload
from tests.factories import OTHER_SOURCE, SOURCE, contribution_payload, contribution_report
from tests.mcp.conftest import LOCAL_SERVER, call, connected
from tests.scripts import loaded_script

PRIVATE = "It only fails on http://192.168.1.20:8080/ and in /home/alice/build."


@pytest.fixture(scope="module")
def local() -> Iterator[ModuleType]:
    yield from loaded_script(LOCAL_SERVER, "cairn_mcp_checks_under_test")


def _site_shape_issues(report):
    with pytest.raises(Refusal) as refused:
        parse_payload(ContributionPayload, contribution_payload(report))
    return refused.value.code, [issue.as_dict() for issue in refused.value.issues]


BAD_SHAPES = {
    "another schema": contribution_report(schema="cairn.task.contribution/9"),
    "an unknown field": contribution_report(tags=["a2a"]),
    "a short summary": contribution_report(summary="short"),
    "another verdict": contribution_report(verdict="maybe"),
    "a hidden character": contribution_report(summary="Set on every call\u200b of the client."),
    "no attempt": contribution_report(attempts=[]),
    "a repeated source": contribution_report(source_urls=[SOURCE, SOURCE]),
    "a number for a text": contribution_report(conditions=[5]),
}


@pytest.mark.parametrize("report", BAD_SHAPES.values(), ids=BAD_SHAPES)
def test_the_shape_issues_are_the_sites_word_for_word(local, report):
    code, issues = local.report_issues(report, {"state": "open", "sources": [SOURCE]})

    assert (code, issues) == _site_shape_issues(report)


def test_the_preview_lists_what_the_sites_checks_find_and_a_send_they_refuse_sends_nothing(
    local_server, make_agent, post_task
):
    task = post_task(make_agent())
    server = local_server("careful")
    reports = {
        "invalid_payload": contribution_report(summary="short"),
        "source_not_in_task": contribution_report(
            source_urls=[OTHER_SOURCE, "https://example.org/a"]
        ),
        "private_content": contribution_report(summary=PRIVATE),
    }

    async def scenario():
        async with connected(server) as (client,):
            await call(client, "cairn_local_set_consent", {"public_output": True})
            previews, sent = {}, {}
            for code, report in reports.items():
                arguments = {"task_id": str(task.pk), "report": report}
                previews[code] = await call(client, "cairn_a2a_contribute", arguments)
                sent[code] = await call(
                    client,
                    "cairn_a2a_contribute",
                    {**arguments, "public_output_digest": canonical_digest(report)},
                )
            return previews, sent

    previews, sent = anyio.run(scenario)

    for code, preview in previews.items():
        assert not preview.is_error
        assert preview.data["public_output_digest"] == canonical_digest(reports[code])
        assert preview.data["form"] == "plain"
        assert {issue["code"] for issue in preview.data["issues"]} == {code}, preview.data
        assert sent[code].code == code
        assert sent[code].data["error"]["issues"] == preview.data["issues"]
    assert [i["path"] for i in previews["source_not_in_task"].data["issues"]] == ["source_urls[1]"]
    assert {i["path"] for i in previews["private_content"].data["issues"]} == {"summary"}
    assert "192.168" not in str(previews["private_content"].data["issues"])
    assert not (server.home / "token").exists()  # nothing was sent: never registered
    assert Agent.objects.count() == 1 and Contribution.objects.count() == 0


def test_a_closed_task_is_refused_before_any_other_rule(local_server, past_task):
    closed = past_task([])
    report = contribution_report(summary=PRIVATE)

    async def scenario():
        async with connected(local_server()) as (client,):
            await call(client, "cairn_local_set_consent", {"public_output": True})
            arguments = {"task_id": str(closed.pk), "report": report}
            return (
                await call(client, "cairn_a2a_contribute", arguments),
                await call(
                    client,
                    "cairn_a2a_contribute",
                    {**arguments, "public_output_digest": canonical_digest(report)},
                ),
            )

    preview, sent = anyio.run(scenario)

    assert [issue["code"] for issue in preview.data["issues"]] == ["task_closed"]
    assert sent.code == "task_closed"
