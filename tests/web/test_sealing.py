"""SPEC §2, §4.2 through the web door: sealed content and agent identities never reach a page or the
Atom feed before evaluation; the reports are published on the task page after it, identities never."""

from __future__ import annotations

import uuid

from agents.models import Door
from agents.services import Caller
from calls.services import call_answer, call_create
from tests.factories import contribution_payload, contribution_report


def _marker(kind: str) -> str:
    return f"Marker{kind}{uuid.uuid4().hex[:12]}"


def _public_pages(http, task_id: str, call_id: str) -> dict[str, str]:
    paths = [
        "/a2a",
        "/a2a?mode=open",
        "/a2a?mode=evaluated",
        "/a2a?mode=all",
        f"/a2a/tasks/{task_id}",
        "/a2a/feed.atom",
        "/a2a/calls",
        f"/a2a/calls/{call_id}",
        "/a2a/join",
        "/skills/cairn-a2a/SKILL.md",
        "/skills/cairn-a2a-participate/SKILL.md",
        "/skills/cairn/references/connection.md",
        "/a2a-join-request.txt",
        "/a2a-request-work.txt",
    ]
    pages = {}
    for path in paths:
        response = http.get(path)
        assert response.status_code == 200, path
        pages[path] = response.text
    return pages


def test_sealed_reports_and_agent_identities_stay_off_every_page(
    http, make_agent, task_with, contribute
):
    # Given a task with two contributions full of unique markers, from labelled agents
    markers = {kind: _marker(kind) for kind in ("Summary", "Condition", "Attempt", "Limitation")}
    poster = make_agent(label=_marker("PosterLabel"))
    contributors = [make_agent(label=_marker("ContributorLabel")) for _ in range(2)]
    reports = [
        contribution_report(
            verdict=verdict,
            summary=f"The transport sets the header on every request: {markers['Summary']}.",
            conditions=[f"Holds at {markers['Condition']}"],
            attempts=[f"Read the transport source, {markers['Attempt']}"],
            limitations=[f"Did not run it, {markers['Limitation']}"],
        )
        for verdict in ("source_supported", "source_contradicted")
    ]
    posted = task_with(deadline_s=4, poster=poster)
    receipts = [
        contribute(contributor, posted.task, contribution_payload(report))["receipt"]
        for contributor, report in zip(contributors, reports, strict=True)
    ]
    answerer = make_agent(label=_marker("AnswererLabel"))
    call = call_create(
        title="Feedback on Cairn's feed page", body="What would you change?", kind="feedback"
    )
    call_answer(
        Caller(answerer.agent, str(uuid.uuid4()), Door.HTTP),
        call_id=call.id,
        payload={
            "schema": "cairn.call.response/0.1",
            "body": "Show the number of contributions on each card, as it already does.",
            "public_output_approved": True,
        },
    )
    identities = [str(agent.agent.id) for agent in (poster, *contributors, answerer)] + [
        agent.agent.label for agent in (poster, *contributors, answerer)
    ]
    sealed = [*markers.values(), *(receipt["contribution_id"] for receipt in receipts)]
    task_pages = ["/a2a", "/a2a?mode=open", "/a2a?mode=all", f"/a2a/tasks/{posted.id}"]

    # When every public page is read before the deadline
    before = _public_pages(http, posted.id, str(call.id))

    # Then no sealed content, verdict, contribution id or agent identity is on any of them
    for path, text in before.items():
        for secret in sealed + identities:
            assert secret not in text, (path, secret)
    for path in task_pages:  # nor any verdict: the only one that would show is the sealed one
        for verdict in (
            "source_contradicted",
            "Source contradicted",
            "source_supported",
            "Source supported",
        ):
            assert verdict not in before[path], (path, verdict)
    assert "1 / 3 contributions" not in before[f"/a2a/tasks/{posted.id}"]
    assert "2 / 3" in before[f"/a2a/tasks/{posted.id}"]

    # When the deadline has passed and the pages are read again
    posted.wait_past_deadline()
    after = _public_pages(http, posted.id, str(call.id))

    # Then the task page publishes every report with its digest, and identities stay off every page
    task_page = after[f"/a2a/tasks/{posted.id}"]
    for marker in markers.values():
        assert marker in task_page
    for receipt in receipts:
        assert receipt["report_digest"] in task_page
        assert receipt["contribution_id"] in task_page
    assert "Contested" in task_page
    for path, text in after.items():
        for identity in identities:
            assert identity not in text, (path, identity)
