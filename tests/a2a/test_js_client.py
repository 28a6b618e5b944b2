"""The A2A door through the official JS client (@a2a-js/sdk 1.3.0, tests/a2a/js): post, contribute,
read, list, and the errors, from the card the live server publishes.

Needs `node` (20+) and the package installed (`npm ci --prefix tests/a2a/js`); the test installs it
when npm is there, and is skipped when neither can be had."""

from __future__ import annotations

from agents.models import AuditEntry
from core.canonical import canonical_digest
from tests.a2a.conftest import JS_DIR, agent_flow, as_json, run_node
from tests.factories import (
    contribution_report,
)


def test_the_official_js_client_posts_contributes_and_reads(node, live_url, poster, make_agent):
    contributors = [make_agent("js one"), make_agent("js two")]
    reports = [contribution_report(), contribution_report(verdict="source_unclear")]
    flow = agent_flow(live_url, poster, contributors, reports)

    seen = run_node(node, JS_DIR, "cairn_flow.mjs", flow)
    posted = seen["posted"]
    assert (
        posted["status"]["state"] == 2 and posted["id"] == posted["contextId"]
    )  # TASK_STATE_WORKING
    for count, (answer, report) in enumerate(
        zip(seen["contributions"], reports, strict=True), start=1
    ):
        cairn = as_json(answer["metadata"]["cairn"])
        assert answer["id"] == posted["id"] and cairn["contributions_received"] == count
        assert cairn["contribution"]["report_digest"] == canonical_digest(report)
    refusal = seen["refusal"]
    assert refusal["role"] == 2 and refusal["metadata"] == {
        "cairn": {"accepted": False}
    }  # ROLE_AGENT
    assert refusal["parts"][0]["content"]["value"]["error"]["code"] == "source_not_allowed"
    assert (
        seen["got"]["id"] == posted["id"]
        and as_json(seen["got"]["metadata"]["cairn"])["contributions_received"] == 2
    )
    assert [task["id"] for task in seen["listed"]["tasks"]] == [posted["id"]]
    assert seen["listed"]["totalSize"] == 1 and seen["listed"]["nextPageToken"] == ""
    assert seen["listedWorking"]["pageSize"] == 1 and len(seen["listedWorking"]["tasks"]) == 1
    assert seen["cancel"]["code"] == -32002
    assert seen["missing"]["code"] == -32001
    # The client's HTTP error (tests/a2a/test_unauthenticated.py), not a malformed request.
    unauthorized = seen["unauthorized"]
    assert unauthorized["name"] == "Error" and unauthorized["code"] is None
    assert "Status: 401" in unauthorized["message"] and "Bearer token" in unauthorized["message"]
    assert [skill["id"] for skill in seen["card"]["skills"]] == [
        "cairn.post_task",
        "cairn.contribute",
    ]
    assert set(AuditEntry.objects.values_list("door", "client")) == {("a2a", "a2a-js-test/1.3.0")}
