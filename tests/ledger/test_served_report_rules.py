"""The checks the served files run on a report before it goes anywhere, held to the site's: the
local MCP server's checks before sealing (its models are built from the site's own schemas) and the
verifier's rules over a report it opens again (§4.1, §5, §15.8), each run in the built file."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

import pytest

from core import privacy
from core.errors import Refusal
from core.payloads import parse_payload
from ledger.verifier import VERIFIER
from tasks.opening import report_rules_void
from tasks.payloads import ContributionPayload
from tasks.report_checks import report_texts, source_in_task_issues
from tests.factories import OTHER_SOURCE, SOURCE, contribution_payload, contribution_report
from tests.mcp.conftest import LOCAL_SERVER
from tests.scripts import loaded_script

SOURCES = [SOURCE, OTHER_SOURCE]


def _site_rules(report: dict[str, Any]) -> str:
    """The first rule the site's own code finds broken in a report it opens (§15.8): its shape
    as `cairn.task.contribution/0.1` with the approval its digest gives, the task's sources,
    the privacy screen."""
    try:
        parsed = parse_payload(ContributionPayload, contribution_payload(report))
    except Refusal as refusal:
        return refusal.code
    if source_in_task_issues(parsed.source_urls, SOURCES):
        return "source_not_in_task"
    if privacy.screen(report_texts(dict(parsed))):
        return "private_content"
    return ""


def _without(name: str) -> dict[str, Any]:
    report = contribution_report()
    del report[name]
    return report


REPORTS = {
    "a good report": contribution_report(),
    "another schema": contribution_report(schema="cairn.task.contribution/0.2"),
    "no schema": _without("schema"),
    "no attempts": _without("attempts"),
    "an unknown field": contribution_report(tags=["x"]),
    "another verdict": contribution_report(verdict="source_maybe"),
    "a short summary": contribution_report(summary="too short"),
    "a long summary": contribution_report(summary="x" * 2001),
    "a hidden character": contribution_report(summary="The header is set on every\u202e call."),
    "a tab": contribution_report(summary="The header is set on every\tcall, always."),
    "no attempt": contribution_report(attempts=[]),
    "eleven conditions": contribution_report(conditions=["c"] * 11),
    "an empty limitation": contribution_report(limitations=[""]),
    "a long attempt": contribution_report(attempts=["a" * 501]),
    "a number for a text": contribution_report(summary=12345),
    "a text for a list": contribution_report(conditions="none"),
    "a repeated source": contribution_report(source_urls=[SOURCE, SOURCE]),
    "no source": contribution_report(source_urls=[]),
    "a source outside the task": contribution_report(source_urls=["https://example.org/page"]),
    "a private address": contribution_report(summary="It fails on http://192.168.1.20/ only."),
    "a private attempt": contribution_report(attempts=["ran it as /home/alice/bin/check"]),
    "a token in a condition": contribution_report(
        conditions=["export OPENAI=sk-proj-4f9A8b7C6d5E4f3G2h1I0jKlMn"]
    ),
}


OPENED_REPORTS = {
    **REPORTS,
    "an approval": {**contribution_report(), "approval": {"public_output": True}},
    "a private unknown field": contribution_report(notes="ask alice@example.com"),
    "a private key name": contribution_report(**{"/home/alice/notes": "x"}),
    "a short summary and a private limitation": contribution_report(
        summary="short", limitations=["see /Users/bob/trace.txt"]
    ),
}


@pytest.mark.parametrize("report", REPORTS.values(), ids=REPORTS)
def test_the_local_servers_checks_before_sealing_are_the_sites_at_receipt(report):
    """The local server refuses what the site would refuse of the plain form at receipt."""
    local = next(loaded_script(LOCAL_SERVER, "cairn_mcp_rules_under_test"))
    found, _ = local.report_issues(copy.deepcopy(report), {"state": "open", "sources": SOURCES})

    assert found == _site_rules(report)


@pytest.mark.parametrize("report", OPENED_REPORTS.values(), ids=OPENED_REPORTS)
def test_the_verifiers_rules_of_an_opened_report_are_the_sites_opening(report):
    """The verifier voids what the site's evaluation voids when it opens a sealed report."""
    verifier = next(loaded_script(VERIFIER, "cairn_verify_rules_under_test"))
    void = report_rules_void(copy.deepcopy(report), SimpleNamespace(sources=SOURCES))
    found, _ = verifier.report_rules(copy.deepcopy(report), SOURCES)

    assert found == (void.code if void else "")
