"""The local server is one file that cannot import the server's models, so the site writes their
schemas into it and it checks a request from them (SPEC §10). These tests hold it to the
originals: the schemas it gives an agent, and the problems its preview finds, are the server's."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from core.canonical import canonical_digest
from core.errors import Refusal
from core.payloads import parse_payload
from mcp_door.local_file import repository_source
from tasks.payloads import ContributionPayload, OpenTaskPayload, OpenTaskRequest
from tests.factories import OTHER_SOURCE, SOURCE, open_task_payload, open_task_request
from tests.mcp.conftest import LOCAL_SERVER
from tests.scripts import loaded_script

# What a schema says to a reader rather than to a validator.
PROSE = ("title", "description")


@pytest.fixture(scope="module")
def local() -> Iterator[ModuleType]:
    """`cairn_mcp.py` loaded as a module, as `uv run` would load it (its `main` is not run)."""
    yield from loaded_script(LOCAL_SERVER, "cairn_mcp_under_test")


def shape(schema: Any) -> Any:
    """A JSON Schema without its prose: what it accepts, and nothing else."""
    if isinstance(schema, dict):
        return {key: shape(value) for key, value in schema.items() if key not in PROSE}
    if isinstance(schema, list):
        return [shape(item) for item in schema]
    return schema


def test_the_request_schema_is_the_servers(local):
    server = local._inline_refs(OpenTaskRequest.model_json_schema(by_alias=True))

    assert shape(local.REQUEST_SCHEMA) == shape(server)


def test_the_report_schema_is_the_servers_contribution_without_its_approval(local):
    server = local._inline_refs(ContributionPayload.model_json_schema(by_alias=True))
    del server["properties"]["approval"]
    server["required"].remove("approval")

    assert shape(local.REPORT_SCHEMA) == shape(server)
    assert local.REPORT_SCHEMA["additionalProperties"] is False


BAD_REQUESTS = {
    "missing field": {k: v for k, v in open_task_request().items() if k != "budget"},
    "unknown field": open_task_request(tags=["a2a"]),
    "short title": open_task_request(title="too short"),
    "hidden character": open_task_request(question="Does the header \u202eget sent on every call?"),
    "repeated source": open_task_request(sources=[SOURCE, SOURCE]),
    "eleven sources": open_task_request(sources=[f"{OTHER_SOURCE}#{n}" for n in range(11)]),
    "long criterion": open_task_request(acceptance_criteria=["x" * 501]),
    "no criteria": open_task_request(acceptance_criteria=[]),
    "unreal deadline": open_task_request(deadline="2026-02-30T10:00:00.000Z"),
    "deadline format": open_task_request(deadline="2026-03-01T10:00:00Z"),
    "string number": open_task_request(min_independent="2"),
    "room": open_task_request(min_independent=4, max_contributors=3),
    "paid": open_task_request(budget={"currency": "USD", "amount": 5}),
    "other currency": open_task_request(budget={"currency": "EUR", "amount": 0}),
}


@pytest.mark.parametrize("request_", BAD_REQUESTS.values(), ids=BAD_REQUESTS)
def test_the_preview_finds_the_problems_the_server_refuses(local, request_):
    with pytest.raises(Refusal) as refused:
        parse_payload(OpenTaskPayload, open_task_payload(request_))
    server = [issue.as_dict() for issue in refused.value.issues]

    assert local.request_issues(request_) == server


def test_a_good_request_has_no_problems_on_either_side(local):
    request = open_task_request()

    assert local.request_issues(request) == []
    assert parse_payload(OpenTaskPayload, open_task_payload(request))


def test_the_digest_a_person_approves_is_the_one_the_server_checks(local):
    request = open_task_request(title="Ünïcode, \u00e9 and 1e3 in one title", min_independent=2)
    value = {"request": request, "numbers": [0, -1, 1.5, 10**15], "nested": {"b": 1, "a": [None]}}

    assert local.canonical_digest(value) == canonical_digest(value)


def test_the_file_holds_the_schemas_the_site_writes_into_it():
    """After a model changes, `manage.py write_local_mcp` writes its schemas into the file."""
    assert LOCAL_SERVER.read_text(encoding="utf-8") == repository_source()
