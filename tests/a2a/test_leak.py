"""SPEC §4.2: sealed means sealed. Nothing an A2A client can ask shows a contribution's content
before the evaluation; afterwards every report is there with its digest. No agent id, ever."""

from __future__ import annotations

import uuid

from core.canonical import canonical_digest
from tests.a2a.conftest import as_json, message, result_of, wait_past
from tests.factories import (
    contribution_payload,
    contribution_report,
    deadline_in,
    open_task_payload,
    open_task_request,
)


def marked_report(marker: str) -> dict:
    return contribution_report(
        summary=f"The transport sets the header on every call, see note {marker} in the source.",
        conditions=[f"Holds for release {marker}-c"],
        attempts=[f"Read the transport at tag {marker}-a"],
        limitations=[f"Skipped the gRPC transport {marker}-l"],
    )


def test_sealed_reports_never_show_before_the_evaluation_and_all_show_after(
    rpc, http, short_deadlines, make_agent
):
    poster, first, second = (
        make_agent("poster-label"),
        make_agent("first-label"),
        make_agent("second-label"),
    )
    markers = [f"mk{uuid.uuid4().hex[:10]}" for _ in range(2)]
    reports = [marked_report(marker) for marker in markers]
    deadline = deadline_in(2.5)
    posted = result_of(
        rpc(
            "SendMessage",
            {"message": message(open_task_payload(open_task_request(deadline=deadline)))},
            token=poster.token,
        )
    )
    task_id = posted["task"]["id"]
    answers = [posted]

    def ask_everything(token: str | None) -> None:
        answers.append(rpc("GetTask", {"id": task_id}, token=token).json())
        answers.append(rpc("CancelTask", {"id": task_id}, token=token).json())
        for params in (
            {},
            {"includeArtifacts": True},
            {"status": "TASK_STATE_WORKING", "includeArtifacts": True},
            {"contextId": task_id, "includeArtifacts": True},
        ):
            answers.append(rpc("ListTasks", params, token=token).json())

    message_ids = {}
    for agent, report in zip((first, second), reports, strict=True):
        message_ids[agent.token] = str(uuid.uuid4())
        sent = message(
            contribution_payload(report), task_id=task_id, message_id=message_ids[agent.token]
        )
        answers.append(result_of(rpc("SendMessage", {"message": sent}, token=agent.token)))
        answers.append(
            result_of(rpc("SendMessage", {"message": sent}, token=agent.token))
        )  # the replay
        ask_everything(agent.token)
    duplicate = message(contribution_payload(reports[1]), task_id=task_id)
    answers.append(result_of(rpc("SendMessage", {"message": duplicate}, token=first.token)))
    ask_everything(None)

    before = str(answers)
    assert "source_supported" not in before  # not even the verdicts
    before += http.get("/.well-known/agent-card.json").text
    for marker in markers:
        assert marker not in before
    for agent in (poster, first, second):
        assert (
            str(agent.agent.id) not in before
            and agent.agent.label not in before
            and agent.token not in before
        )

    wait_past(deadline)
    done = result_of(rpc("GetTask", {"id": task_id}))
    listed = result_of(rpc("ListTasks", {"includeArtifacts": True}))

    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [t["id"] for t in listed["tasks"]] == [task_id]
    assert as_json(listed["tasks"][0]["artifacts"][0]["parts"][0]["data"]) == as_json(
        done["artifacts"][0]["parts"][0]["data"]
    )
    (artifact,) = done["artifacts"]
    contributions = as_json(artifact["parts"][0]["data"])["contributions"]
    assert [item["report"] for item in contributions] == reports
    for item, report in zip(contributions, reports, strict=True):
        assert item["report_digest"] == canonical_digest(item["report"]) == canonical_digest(report)
    receipts = [
        as_json(a["task"]["metadata"]["cairn"]["contribution"])
        for a in answers[1:]
        if "task" in a and "contribution" in a["task"]["metadata"]["cairn"]
    ]
    assert {r["report_digest"] for r in receipts} == {
        item["report_digest"] for item in contributions
    }
    after = str(done) + str(listed)
    for agent in (poster, first, second):
        assert str(agent.agent.id) not in after and agent.agent.label not in after
