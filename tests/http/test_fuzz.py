"""The OpenAPI document is as precise as the server: schemathesis, through its pytest integration,
generates requests from /api/openapi.json (valid and not), sends them to a live server with a token,
and checks every answer against the document; then its stateful phase follows the document's links
(a list to its items and next page, a posted task to its view and contributions, a call to its
answers). Bounded, so it stays within a minute or two on a small machine.

Every check schemathesis has runs, but one is replaced: positive data acceptance judges by status
alone, and here 422 is both "wrong shape" and "a rule refused it", so a schema-valid request would
fail it whenever a rule binds (a deadline out of range, a source off the allowlist, an approval
whose digest does not match). `accepted_or_refused_by_a_rule` is the same promise read from the
refusal's code: a request the document calls valid is taken, or refused by a rule, never for its
shape (nor with a 401: the token is good). A cursor is the one value whose form is public but
whose validity is not (it is signed): one in the form the server issues that it never issued is
refused as a rule; one of another form must not be offered as valid, and one issued for the same
mode must be taken. `use_after_free` runs but has nothing to judge: nothing here is deleted.

The stateful phase gives its writes what only the rules judge (`_rule_abiding`), or no chain would
pass the first write. A scenario Hypothesis replays may meet a server whose state has moved on
(another page first, a task now full); Hypothesis then stops the run as flaky, which says nothing of
the API, so the run starts again, as schemathesis' own runner does, unless a check had failed.

The pytest integration's fixture loader reads `request.node._nodeid`, which pytest 9.2 no longer
has (a node keeps its id in `_id`); the schema fixture gives the node that attribute, which the
loader only reads and rewrites to name each operation in its reports."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis.errors import FlakyStrategyDefinition
from schemathesis.config import SchemathesisConfig
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.schemas import OpenApiSchema

from core.canonical import canonical_digest
from core.cursors import CURSOR_FORM
from core.errors import ErrorCode
from tests.factories import OTHER_SOURCE, SOURCE, deadline_in

EXAMPLES_PER_OPERATION = 40
RUNS = 3
SCENARIOS_PER_RUN = 20
STEPS_PER_SCENARIO = 6
# The refusals that say a request is not what the document describes.
SHAPE = {
    ErrorCode.INVALID_JSON,
    ErrorCode.INVALID_PAYLOAD,
    ErrorCode.INVALID_QUERY,
    ErrorCode.UNKNOWN_SCHEMA,
    ErrorCode.PAYLOAD_TOO_LARGE,
    ErrorCode.METHOD_NOT_ALLOWED,
    ErrorCode.UNAUTHORIZED,
}
LISTS = {"/api/a2a-tasks", "/api/a2a-calls"}
_issued: set[tuple[str, str, str]] = set()


def _mode(case: schemathesis.Case) -> str:
    return (case.query or {}).get("mode", "all")


def accepted_or_refused_by_a_rule(ctx: Any, response: Any, case: schemathesis.Case) -> None:
    meta = case.meta
    listing = case.method == "GET" and case.path in LISTS
    if response.status_code < 400:
        if listing and response.json()["next_cursor"] is not None:
            _issued.add((case.path, _mode(case), response.json()["next_cursor"]))
        return
    if meta is None or not meta.generation.mode.is_positive:
        return
    error = response.json().get("error")
    assert error is not None, f"a schema-valid request got {response.status_code}: {response.text}"
    cursor = (case.query or {}).get("cursor")
    if error["code"] == ErrorCode.INVALID_QUERY and listing and cursor:
        assert re.fullmatch(CURSOR_FORM, cursor), f"a cursor of no issued form offered: {error}"
        assert (case.path, _mode(case), cursor) not in _issued, f"an issued cursor refused: {error}"
        return
    assert error["code"] not in SHAPE, f"a schema-valid request refused for its shape: {error}"


@pytest.fixture
def cairn_api(request, live_url, raised_caps, make_agent, post_task, make_call) -> OpenApiSchema:
    request.node._nodeid = request.node.nodeid
    poster = make_agent("poster")
    for _ in range(3):
        post_task(poster)
    for _ in range(3):
        make_call()
    fuzzer = make_agent("fuzzer")
    config = SchemathesisConfig.from_dict(
        {
            "auth": {"openapi": {"bearer": {"bearer": fuzzer.token}}},
            "checks": {"positive_data_acceptance": {"enabled": False}},
        }
    )
    _issued.clear()
    return schemathesis.openapi.from_url(f"{live_url}/api/openapi.json", config=config)


schema = schemathesis.pytest.from_fixture("cairn_api")


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
)
def test_every_answer_conforms_to_the_openapi_document(case):
    case.call_and_validate(additional_checks=[accepted_or_refused_by_a_rule])


def _rule_abiding(case: schemathesis.Case) -> None:
    """Give a generated write what only the rules judge (the deadline's range, the allowlist, a
    digest of what was sent), so the chains the links describe go past the first write; the
    generated text and numbers are kept and go through every rule and view. A list read keeps no
    invented cursor: a cursor is the server's own token, which only a page's link gives, so an
    invented one is always refused and the walk would never follow a list to its items."""
    if case.method == "GET" and isinstance(case.query, dict):
        case.query.pop("cursor", None)
    body = case.body
    if not isinstance(body, dict) or case.meta is None or not case.meta.generation.mode.is_positive:
        return
    if case.path == "/api/a2a-tasks" and isinstance(body.get("request"), dict):
        request = body["request"]
        request.update(deadline=deadline_in(3600), sources=[SOURCE, OTHER_SOURCE])
        body["approval"] = {
            "public_input_digest": canonical_digest(copy.deepcopy(request)),
            "public_output": True,
            "scope": "this_open_task",
        }
    elif case.path.endswith("/contributions") and "verdict" in body:
        body["source_urls"] = [SOURCE]
        report = {key: value for key, value in body.items() if key != "approval"}
        body["approval"] = {
            "public_output_digest": canonical_digest(report),
            "public_output": True,
            "scope": "this_contribution",
        }
    elif case.path.endswith("/responses"):
        body["public_output_approved"] = True


def test_the_documented_links_lead_through_the_api(cairn_api):
    steps: list[tuple[str, int]] = []
    failures: list[FailureGroup] = []

    class Workflow(cairn_api.as_state_machine()):  # type: ignore[misc]
        def before_call(self, case: schemathesis.Case) -> None:
            _rule_abiding(case)

        def after_call(self, response: Any, case: schemathesis.Case) -> None:
            super().after_call(response, case)
            steps.append((f"{case.method} {case.path}", response.status_code))

        def validate_response(self, response, case, additional_checks=None, **kwargs) -> None:
            try:
                super().validate_response(
                    response, case, additional_checks=[accepted_or_refused_by_a_rule], **kwargs
                )
            except FailureGroup as failure:
                failures.append(failure)
                raise

    for _ in range(RUNS):
        try:
            Workflow.run(
                settings=settings(
                    max_examples=SCENARIOS_PER_RUN,
                    stateful_step_count=STEPS_PER_SCENARIO,
                    deadline=None,
                    suppress_health_check=list(HealthCheck),
                    database=None,
                )
            )
        except FlakyStrategyDefinition:
            # The server's state moved under a replayed scenario; only a check's failure counts.
            if failures:
                raise failures[0] from None
    # A random id is not found: these answers mean a link gave a real one.
    assert ("POST /api/a2a-tasks", 201) in steps, steps
    assert ("GET /api/a2a-tasks/{task_id}", 200) in steps, steps
    assert ("GET /api/a2a-calls/{call_id}", 200) in steps, steps
    contributed = {status for label, status in steps if label.endswith("/contributions")}
    assert contributed & {201, 409}, steps
