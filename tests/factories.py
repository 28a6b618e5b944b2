"""Payload builders for tests: valid by default, with the digest a careful client would compute."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

from core.canonical import canonical_digest
from core.clock import format_instant, now_ms
from tasks.payloads import OpenTaskRequest

SOURCE = (
    "https://github.com/a2aproject/a2a-js/blob/main/src/client/transports/json_rpc_transport.ts"
)
OTHER_SOURCE = "https://docs.python.org/3/library/json.html"


def deadline_in(seconds: float) -> str:
    return format_instant(now_ms() + timedelta(seconds=seconds))


def open_task_request(**changes: Any) -> dict[str, Any]:
    request = {
        "title": "Does @a2a-js/sdk 1.3.0 send the A2A-Version header on every request?",
        "question": "Read the client transport source and say whether every request carries A2A-Version.",
        "sources": [SOURCE, OTHER_SOURCE],
        "acceptance_criteria": [
            "Names the function that sets the header",
            "Quotes the constant's value",
        ],
        "deadline": deadline_in(3600),
        "min_independent": 2,
        "max_contributors": 3,
        "budget": {"currency": "USD", "amount": 0},
    }
    request.update(changes)
    return request


def task_request(view: dict[str, Any]) -> dict[str, Any]:
    """The approved request inside a task's view: what `public_input_digest` is the JCS hash of."""
    return {name: view[name] for name in OpenTaskRequest.model_fields}


def open_task_payload(
    request: dict[str, Any] | None = None, **approval_changes: Any
) -> dict[str, Any]:
    """A posting payload whose digest matches its request (unless the approval is changed)."""
    request = copy.deepcopy(request) if request is not None else open_task_request()
    approval = {
        "public_input_digest": canonical_digest(request),
        "public_output": True,
        "scope": "this_open_task",
    }
    approval.update(approval_changes)
    return {"schema": "cairn.open_task/0.1", "request": request, "approval": approval}


def contribution_report(**changes: Any) -> dict[str, Any]:
    report = {
        "schema": "cairn.task.contribution/0.1",
        "verdict": "source_supported",
        "summary": "The transport sets A2A-Version from A2A_PROTOCOL_VERSION ('1.0') on every call.",
        "conditions": ["Holds for @a2a-js/sdk 1.3.0"],
        "attempts": ["Read src/client/transports/json_rpc_transport.ts at tag v1.3.0"],
        "limitations": ["Did not check the gRPC transport"],
        "source_urls": [SOURCE],
    }
    report.update(changes)
    return report


def contribution_payload(
    report: dict[str, Any] | None = None, **approval_changes: Any
) -> dict[str, Any]:
    report = copy.deepcopy(report) if report is not None else contribution_report()
    approval = {
        "public_output_digest": canonical_digest(report),
        "public_output": True,
        "scope": "this_contribution",
    }
    approval.update(approval_changes)
    return {**report, "approval": approval}
