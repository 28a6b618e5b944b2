"""SPEC §8.7 through the official JS client (@a2a-js/sdk 1.3.0, its gRPC transport from
`@a2a-js/sdk/client/grpc` over `@grpc/grpc-js`, tests/a2a/js) allowed only gRPC: it reads the card
the live web server publishes and posts, replays, contributes, is refused, reads, lists a page
and the next, cancels and is turned away without a token, as an agent would.

Needs `node` (20+) and the packages installed (`npm ci --prefix tests/a2a/js`); the test
installs them when npm is there, and is skipped when neither can be had."""

from __future__ import annotations

import grpc

from agents.models import AuditEntry
from core.canonical import canonical_digest
from tasks.models import Task as TaskRow
from tests.a2a.conftest import JS_DIR, agent_flow, as_json, node, run_node  # noqa: F401  (the Node.js fixture)
from tests.factories import (
    contribution_report,
)

TASK_STATE_WORKING, ROLE_AGENT = 2, 2  # the proto enums' numbers, as the JS client gives them


def test_the_official_js_client_over_grpc_posts_contributes_and_reads(
    node,  # noqa: F811
    card_url,
    poster,
    make_agent,
    post_task,
):
    earlier = str(post_task(poster).pk)
    contributors = [make_agent("js one"), make_agent("js two")]
    reports = [contribution_report(), contribution_report(verdict="source_unclear")]
    flow = agent_flow(card_url, poster, contributors, reports)

    seen = run_node(node, JS_DIR, "cairn_grpc_flow.mjs", flow)

    assert seen["protocol"] == "GRPC"
    posted = seen["posted"]
    assert posted["status"]["state"] == TASK_STATE_WORKING and posted["id"] == posted["contextId"]
    assert seen["replayed"] == posted and TaskRow.objects.count() == 2
    for count, (answer, report) in enumerate(
        zip(seen["contributions"], reports, strict=True), start=1
    ):
        cairn = as_json(answer["metadata"]["cairn"])
        assert answer["id"] == posted["id"] and cairn["contributions_received"] == count
        assert cairn["contribution"]["report_digest"] == canonical_digest(report)
    refusal = seen["refusal"]
    assert refusal["role"] == ROLE_AGENT and refusal["metadata"] == {"cairn": {"accepted": False}}
    assert refusal["parts"][0]["content"]["value"]["error"]["code"] == "source_not_allowed"
    got = seen["got"]
    assert (
        got["id"] == posted["id"]
        and as_json(got["metadata"]["cairn"])["contributions_received"] == 2
    )
    assert [task["id"] for task in seen["listed"]["tasks"]] == [posted["id"], earlier]
    assert seen["listed"]["totalSize"] == 2 and seen["listed"]["nextPageToken"] == ""
    assert seen["listedWorking"]["tasks"] == [got] and seen["listedWorking"]["pageSize"] == 1
    assert [task["id"] for task in seen["nextPage"]["tasks"]] == [earlier]
    assert seen["nextPage"]["nextPageToken"] == ""
    # gRPC's status and the ErrorInfo's reason, as the client reads them (A2A 1.0's mapping).
    assert (seen["cancel"]["name"], seen["cancel"]["status"], seen["cancel"]["reason"]) == (
        "GrpcTaskNotCancelableError",
        grpc.StatusCode.FAILED_PRECONDITION.value[0],
        "TASK_NOT_CANCELABLE",
    )
    assert (seen["missing"]["name"], seen["missing"]["status"], seen["missing"]["reason"]) == (
        "GrpcTaskNotFoundError",
        grpc.StatusCode.NOT_FOUND.value[0],
        "TASK_NOT_FOUND",
    )
    unauthenticated = seen["unauthenticated"]
    assert unauthenticated["status"] == grpc.StatusCode.UNAUTHENTICATED.value[0]
    assert "Bearer" in unauthenticated["message"]
    assert set(AuditEntry.objects.exclude(object_id=earlier).values_list("door", "client")) == {
        ("a2a", "a2a-js-grpc-test/1.3.0")
    }
