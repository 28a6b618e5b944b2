"""The published JSON Schemas (SPEC §12) and the OpenAPI description, read over HTTP and used for real."""

from __future__ import annotations

import copy
import re
import uuid
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from calls.payloads import CallResponsePayload
from calls.services import call_close
from core.canonical import canonical_digest
from core.clock import parse_instant
from core.payloads import model_schema
from http_api.errors import STATUS_BY_CODE
from http_api.schema_views import openapi_document
from ledger.keyper_seal import Keyper, keyper_public, seal
from tasks.models import Task
from tasks.payloads import (
    ContributionPayload,
    OpenTaskPayload,
    OpenTaskRequest,
    SealedContributionPayload,
)
from tasks.rendered import task_view
from tasks.view_models import TaskView
from tests.factories import (
    contribution_payload,
    contribution_report,
    deadline_in,
    open_task_payload,
    open_task_request,
)
from tests.http.conftest import bearer, refused, wait_past
from tests.keypers import keypers_configure, keypers_made

DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMAS = {
    "open-task.json": TaskView,
    "open-task-create.json": OpenTaskPayload,
    "task-contribution.json": ContributionPayload,
    "task-contribution-sealed.json": SealedContributionPayload,
    "call-response.json": CallResponsePayload,
}

# The SPEC's own examples, with its placeholders ("sha256:<hex>", "...") filled in.
SPEC_REQUEST = {
    "title": "Does @a2a-js/sdk 1.3.0 send the A2A-Version header on every request?",
    "question": "Read the client transport source and say whether ...",
    "sources": [
        "https://github.com/a2aproject/a2a-js/blob/main/src/client/transports/json_rpc_transport.ts"
    ],
    "acceptance_criteria": [
        "Names the function that sets the header",
        "Quotes the constant's value",
    ],
    "deadline": "2026-12-01T12:00:00.000Z",
    "min_independent": 2,
    "max_contributors": 3,
    "budget": {"currency": "USD", "amount": 0},
}
SPEC_OPEN_TASK = {
    "schema": "cairn.open_task/0.1",
    "request": SPEC_REQUEST,
    "approval": {
        "public_input_digest": canonical_digest(SPEC_REQUEST),
        "public_output": True,
        "scope": "this_open_task",
    },
}
SPEC_REPORT = {
    "schema": "cairn.task.contribution/0.1",
    "verdict": "source_supported",
    "summary": "The transport sets A2A-Version from A2A_PROTOCOL_VERSION ('1.0') in ...",
    "conditions": ["Holds for @a2a-js/sdk 1.3.0"],
    "attempts": ["Read src/client/transports/json_rpc_transport.ts at tag v1.3.0"],
    "limitations": ["Did not check the gRPC transport"],
    "source_urls": [
        "https://github.com/a2aproject/a2a-js/blob/main/src/client/transports/json_rpc_transport.ts"
    ],
}
SPEC_CONTRIBUTION = {
    **SPEC_REPORT,
    "approval": {
        "public_output_digest": canonical_digest(SPEC_REPORT),
        "public_output": True,
        "scope": "this_contribution",
    },
}
SPEC_SEALED = seal(
    SPEC_REPORT,
    site="cairn.example/cairn/log",
    task_id="0b8f2c4e-6c1a-4f3e-9d2b-5a7e8c9d0f1a",
    task_entry=41,
    deadline="2026-12-01T12:00:00.000Z",
    keypers=[
        Keyper(
            f"k{n}.example/cairn/witness", keyper_public(X25519PrivateKey.generate()), "https://k"
        )
        for n in range(3)
    ],
    threshold=2,
)
SPEC_CALL_RESPONSE = {
    "schema": "cairn.call.response/0.1",
    "stance": "support",
    "body": "A paper on sealed peer review of public sources would help.",
    "public_output_approved": True,
}
SPEC_EVALUATED_VIEW = {
    "id": "0b8f2c4e-6c1a-4f3e-9d2b-5a7e8c9d0f1a",
    **SPEC_REQUEST,
    "public_input_digest": canonical_digest(SPEC_REQUEST),
    "created_at": "2026-11-30T12:00:00.000Z",
    "state": "evaluated",
    "contributions_received": 1,
    "outcome": "unresolved",
    "verdict": None,
    "evaluated_at": "2026-12-01T12:00:00.412Z",
    "evaluation": {
        "schema": "cairn.evaluation/0.1",
        "rule": "cairn.rules/0.1",
        "outcome": "unresolved",
        "verdict": None,
        "evaluated_at": "2026-12-01T12:00:00.412Z",
        "min_independent": 2,
        "counts": {"source_supported": 1, "source_contradicted": 0, "source_unclear": 0},
        "contributions": [
            {
                "contribution_id": "7d1e5a3b-2f4c-4e6d-8a9b-0c1d2e3f4a5b",
                "received_at": "2026-11-30T13:00:00.000Z",
                "report_digest": canonical_digest(SPEC_REPORT),
                "report": SPEC_REPORT,
            }
        ],
    },
}
SPEC_OPEN_VIEW = {
    **SPEC_EVALUATED_VIEW,
    "state": "open",
    "contributions_received": 0,
    "outcome": None,
    "evaluated_at": None,
    "evaluation": None,
}

EXAMPLES = {
    "open-task.json": [SPEC_OPEN_VIEW, SPEC_EVALUATED_VIEW],
    "open-task-create.json": [SPEC_OPEN_TASK],
    "task-contribution.json": [SPEC_CONTRIBUTION],
    "task-contribution-sealed.json": [SPEC_SEALED],
    "call-response.json": [
        SPEC_CALL_RESPONSE,
        {k: v for k, v in SPEC_CALL_RESPONSE.items() if k != "stance"},
    ],
}


def changed(document: dict, path: str, value: Any = ..., *, delete: bool = False) -> dict:
    """A copy of `document` with the value at a dotted path (list indexes as numbers) replaced or deleted."""
    result = copy.deepcopy(document)
    *parents, last = path.split(".")
    target: Any = result
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    if delete:
        del target[last]
    else:
        target[int(last) if isinstance(target, list) else last] = value
    return result


COUNTER_EXAMPLES = {
    "open-task-create.json": [
        changed(SPEC_OPEN_TASK, "approval", delete=True),
        changed(SPEC_OPEN_TASK, "schema", delete=True),
        changed(SPEC_OPEN_TASK, "schema", "cairn.open_task/0.2"),
        changed(SPEC_OPEN_TASK, "request.tags", ["extra"]),
        changed(SPEC_OPEN_TASK, "request.title", "Too short"),
        changed(SPEC_OPEN_TASK, "request.question", "q" * 2001),
        changed(SPEC_OPEN_TASK, "request.sources", []),
        changed(SPEC_OPEN_TASK, "request.sources", [f"https://github.com/{n}" for n in range(11)]),
        changed(SPEC_OPEN_TASK, "request.acceptance_criteria", []),
        changed(SPEC_OPEN_TASK, "request.deadline", "2026-12-01T12:00:00Z"),
        changed(SPEC_OPEN_TASK, "request.deadline", "2026-12-01 12:00:00.000Z"),
        changed(SPEC_OPEN_TASK, "request.min_independent", 1),
        changed(SPEC_OPEN_TASK, "request.max_contributors", 11),
        changed(SPEC_OPEN_TASK, "request.max_contributors", "3"),
        changed(SPEC_OPEN_TASK, "request.budget.amount", 5),
        changed(SPEC_OPEN_TASK, "request.budget.currency", "EUR"),
        changed(SPEC_OPEN_TASK, "request.deadline", delete=True),
        changed(SPEC_OPEN_TASK, "approval.public_input_digest", "sha256:" + "A" * 64),
        changed(SPEC_OPEN_TASK, "approval.public_output", "yes"),
        [SPEC_OPEN_TASK],
    ],
    "task-contribution.json": [
        changed(SPEC_CONTRIBUTION, "verdict", "true"),
        changed(SPEC_CONTRIBUTION, "summary", "short"),
        changed(SPEC_CONTRIBUTION, "attempts", []),
        changed(SPEC_CONTRIBUTION, "conditions", ["c"] * 11),
        changed(SPEC_CONTRIBUTION, "limitations", [""]),
        changed(SPEC_CONTRIBUTION, "source_urls", []),
        changed(SPEC_CONTRIBUTION, "approval", delete=True),
        changed(SPEC_CONTRIBUTION, "conditions", delete=True),
        changed(SPEC_CONTRIBUTION, "agent_id", "me"),
        changed(SPEC_CONTRIBUTION, "approval.public_output_digest", "sha256:abc"),
        changed(SPEC_CONTRIBUTION, "schema", "cairn.open_task/0.1"),
    ],
    "task-contribution-sealed.json": [
        changed(SPEC_SEALED, "approval", delete=True),
        changed(SPEC_SEALED, "schema", "cairn.task.contribution/0.1"),
        changed(SPEC_SEALED, "task_entry", -1),
        changed(SPEC_SEALED, "task_entry", "41"),
        changed(SPEC_SEALED, "commitment", "sha256:abc"),
        changed(SPEC_SEALED, "ciphertext", "AAAA"),
        changed(SPEC_SEALED, "ciphertext", SPEC_SEALED["ciphertext"] + "=="),
        changed(SPEC_SEALED, "shares", []),
        changed(SPEC_SEALED, "shares.0.index", 0),
        changed(
            SPEC_SEALED, "shares.0.sealed_share", SPEC_SEALED["shares"][0]["sealed_share"][:-1]
        ),
        changed(SPEC_SEALED, "shares.0.keyper", "two words"),
        changed(SPEC_SEALED, "shares.0.threshold", 2),
        changed(SPEC_SEALED, "approval.commitment", delete=True),
        changed(SPEC_SEALED, "report", SPEC_REPORT),
    ],
    "call-response.json": [
        changed(SPEC_CALL_RESPONSE, "stance", "maybe"),
        changed(SPEC_CALL_RESPONSE, "body", "too short"),
        changed(SPEC_CALL_RESPONSE, "body", "b" * 4001),
        changed(SPEC_CALL_RESPONSE, "public_output_approved", delete=True),
        changed(SPEC_CALL_RESPONSE, "schema", delete=True),
        changed(SPEC_CALL_RESPONSE, "agent_id", "me"),
    ],
    "open-task.json": [
        changed(SPEC_OPEN_VIEW, "schema", "cairn.open_task/0.1"),
        changed(SPEC_OPEN_VIEW, "agent_id", "0b8f2c4e-6c1a-4f3e-9d2b-5a7e8c9d0f1a"),
        changed(SPEC_OPEN_VIEW, "state", "closed"),
        changed(SPEC_OPEN_VIEW, "evaluation", delete=True),
        changed(SPEC_OPEN_VIEW, "outcome", "maybe"),
        changed(SPEC_OPEN_VIEW, "created_at", "2026-11-30T12:00:00Z"),
        changed(SPEC_OPEN_VIEW, "contributions_received", -1),
        changed(SPEC_EVALUATED_VIEW, "evaluation.counts", delete=True),
        changed(SPEC_EVALUATED_VIEW, "evaluation.rule", "cairn.rules/0.2"),
        changed(
            SPEC_EVALUATED_VIEW,
            "evaluation.contributions.0.report.approval",
            SPEC_CONTRIBUTION["approval"],
        ),
        changed(SPEC_EVALUATED_VIEW, "evaluation.contributions.0.agent_id", "x"),
    ],
}


@pytest.fixture
def served(api) -> dict[str, dict]:
    schemas = {}
    for name in SCHEMAS:
        response = api.get(f"/schemas/a2a/{name}")
        assert response.status_code == 200
        assert response.headers["Content-Type"].split(";")[0] in {
            "application/schema+json",
            "application/json",
        }
        schemas[name] = response.json()
    return schemas


def test_each_schema_is_2020_12_with_an_absolute_id_and_is_the_models_own(api, live_url, served):
    for name, schema in served.items():
        Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == DIALECT
        assert schema["$id"] == f"{live_url}/schemas/a2a/{name}"
        assert schema == model_schema(SCHEMAS[name], schema_id=schema["$id"])


def test_the_schema_ids_use_the_site_url_when_it_is_set(api, settings):
    settings.CAIRN_SITE_URL = "https://cairn.example"
    schema = api.get("/schemas/a2a/open-task-create.json").json()
    assert schema["$id"] == "https://cairn.example/schemas/a2a/open-task-create.json"


def test_the_schemas_take_the_spec_examples_and_refuse_the_counter_examples(served):
    for name, schema in served.items():
        validator = Draft202012Validator(schema)
        for example in EXAMPLES[name]:
            assert list(validator.iter_errors(example)) == [], (name, example)
        for counter in COUNTER_EXAMPLES[name]:
            assert not validator.is_valid(counter), (name, counter)


def test_what_the_schemas_take_the_server_takes(api, make_agent, served):
    payload = open_task_payload()
    Draft202012Validator(served["open-task-create.json"]).validate(payload)
    posted = api.post("/api/a2a-tasks", json=payload, headers=bearer(make_agent().token))
    assert posted.status_code == 201
    contribution = contribution_payload()
    Draft202012Validator(served["task-contribution.json"]).validate(contribution)
    response = api.post(
        f"/api/a2a-tasks/{posted.json()['task']['id']}/contributions",
        json=contribution,
        headers=bearer(make_agent().token),
    )
    assert response.status_code == 201


def test_every_task_view_validates_against_open_task_json(
    api, served, settings, short_deadlines, make_agent, post_task, contribute
):
    settings.CAIRN_TASKS_PER_AGENT_PER_DAY = settings.CAIRN_OPEN_TASKS_PER_AGENT = 10
    poster = make_agent()
    closing = [
        post_task(poster, open_task_payload(open_task_request(deadline=deadline_in(1.5))))
        for _ in range(3)
    ]
    resolved, contested, unresolved = closing
    contribute(make_agent(), resolved)
    contribute(
        make_agent(),
        resolved,
        contribution_payload(contribution_report(conditions=[], limitations=[])),
    )
    contribute(make_agent(), contested)
    contribute(
        make_agent(), contested, contribution_payload(contribution_report(verdict="source_unclear"))
    )
    contribute(make_agent(), unresolved)
    still_open = post_task(poster)
    contribute(make_agent(), still_open)
    open_views = [api.get(f"/api/a2a-tasks/{task.id}").json() for task in closing + [still_open]]
    wait_past(max(task.deadline_text for task in closing))

    listed = api.get("/api/a2a-tasks").json()["tasks"]

    validator = Draft202012Validator(served["open-task.json"])
    assert {view["outcome"] for view in listed} == {None, "resolved", "contested", "unresolved"}
    for view in open_views + listed:
        assert list(validator.iter_errors(view)) == [], view["id"]
        TaskView.model_validate(view)
    for task in Task.objects.all():
        assert validator.is_valid(task_view(task))


# --- OpenAPI ---------------------------------------------------------------------------------------

ROUTES = {
    ("/api/agent/register", "post"),
    ("/api/a2a-tasks", "get"),
    ("/api/a2a-tasks", "post"),
    ("/api/a2a-tasks/mine", "get"),
    ("/api/a2a-tasks/{task_id}", "get"),
    ("/api/a2a-tasks/{task_id}/contributions", "post"),
    ("/api/a2a-calls", "get"),
    ("/api/a2a-calls/{call_id}", "get"),
    ("/api/a2a-calls/{call_id}/responses", "post"),
    ("/api/log/vkey", "get"),
}


@pytest.fixture
def openapi(api) -> dict:
    response = api.get("/api/openapi.json")
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("application/json")
    return response.json()


def test_openapi_is_a_valid_3_1_document_of_every_route(openapi, live_url):
    assert openapi["openapi"] == "3.1.0"
    assert openapi["servers"] == [{"url": live_url}]
    assert {(path, method) for path, item in openapi["paths"].items() for method in item} == ROUTES
    for schema in openapi["components"]["schemas"].values():
        Draft202012Validator.check_schema(schema)


def test_openapi_passes_the_openapi_spec_validator(openapi):
    validator = pytest.importorskip("openapi_spec_validator")
    validator.validate(openapi)


def test_openapi_refusals_carry_the_spec_statuses(openapi):
    for path, item in openapi["paths"].items():
        for method, operation in item.items():
            for status, response in operation["responses"].items():
                if int(status) < 400:
                    continue
                codes = response["content"]["application/json"]["schema"]["properties"]["error"][
                    "properties"
                ]
                for code in codes["code"]["enum"]:
                    assert STATUS_BY_CODE[code] == int(status), (path, method, code)
    post = openapi["paths"]["/api/a2a-tasks/{task_id}/contributions"]["post"]
    assert post["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ContributionSubmission"
    }
    assert "WWW-Authenticate" in post["responses"]["401"]["headers"]


# Every status each route can answer, from its code: the size check (`ApiView.initial`) and DRF's
# content negotiation come first on every route; the rest is each view's and its service's.
ANSWERS = {
    ("/api/agent/register", "post"): {"201", "400", "406", "413", "422", "429"},
    ("/api/a2a-tasks", "get"): {"200", "400", "406", "413"},
    ("/api/a2a-tasks", "post"): {"201", "400", "401", "406", "409", "413", "422", "429"},
    ("/api/a2a-tasks/mine", "get"): {"200", "400", "401", "406", "413"},
    ("/api/a2a-tasks/{task_id}", "get"): {"200", "400", "404", "406", "413"},
    ("/api/a2a-tasks/{task_id}/contributions", "post"): {
        "201", "400", "401", "404", "406", "409", "413", "422", "429",
    },
    ("/api/a2a-calls", "get"): {"200", "400", "406", "413"},
    ("/api/a2a-calls/{call_id}", "get"): {"200", "400", "404", "406", "413"},
    ("/api/a2a-calls/{call_id}/responses", "post"): {
        "201", "400", "401", "404", "406", "409", "413", "422", "429",
    },
    ("/api/log/vkey", "get"): {"200", "400", "406", "413"},
}  # fmt: skip


def test_openapi_lists_every_status_each_operation_answers(openapi, api, poster, subtests):
    assert {
        (path, method): set(operation["responses"])
        for path, item in openapi["paths"].items()
        for method, operation in item.items()
    } == ANSWERS
    for path, method in ANSWERS:
        url = path.format(task_id=uuid.uuid4(), call_id=uuid.uuid4())
        with subtests.test(path=path, method=method):
            picky = api.request(
                method, url, headers={"Accept": "text/html", **bearer(poster.token)}
            )
            refused(picky, 406, "not_acceptable")
            large = api.request(
                method, url, content=b" " * (300 * 1024), headers=bearer(poster.token)
            )
            refused(large, 413, "payload_too_large")


def test_openapi_offers_the_sealed_form_only_with_keypers_and_pins_their_shares(settings):
    plain = openapi_document(origin="https://cairn.test")["components"]["schemas"]
    assert plain["ContributionSubmission"]["$ref"] == "#/components/schemas/ContributionPayload"
    keypers_configure(settings, keypers_made(2), threshold=2)

    either = openapi_document(origin="https://cairn.test")["components"]["schemas"]
    plain_form, sealed_form = either["ContributionSubmission"]["oneOf"]
    assert plain_form == {"$ref": "#/components/schemas/ContributionPayload"}
    pinned = sealed_form["allOf"][1]["properties"]["shares"]
    assert (pinned["minItems"], pinned["maxItems"]) == (2, 2)
    assert [
        (share["properties"]["keyper"]["const"], share["properties"]["index"]["const"])
        for share in pinned["prefixItems"]
    ] == [(keyper["name"], n) for n, keyper in enumerate(settings.CAIRN_KEYPERS, start=1)]


def test_openapi_states_the_form_of_the_cursors_the_server_issues(openapi, api, make_call):
    for _ in range(3):
        make_call()
    pattern = re.compile(_parameter(openapi, "cursor")["schema"]["pattern"])
    cursor = api.get("/api/a2a-calls", params={"limit": 1}).json()["next_cursor"]

    assert pattern.fullmatch(cursor) and pattern.fullmatch("")
    follow = api.get("/api/a2a-calls", params={"limit": 1, "cursor": cursor})
    assert follow.status_code == 200
    for forged in ("abc", cursor + "x", cursor.replace(":", ";")):
        assert not pattern.fullmatch(forged)
        refused(api.get("/api/a2a-calls", params={"cursor": forged}), 400, "invalid_query")
    # The form is public; only a signature this server made is taken.
    body, stamp, signature = cursor.split(":")
    other = f"{body}:{stamp}:{signature[::-1]}"
    assert pattern.fullmatch(other)
    refused(api.get("/api/a2a-calls", params={"cursor": other}), 400, "invalid_query")


def _parameter(openapi: dict, name: str) -> dict:
    return openapi["components"]["parameters"][name]


def _days() -> list[str]:
    years = (1, 4, 100, 400, 1900, 2000, 2024, 2026, 2100, 9999, 0)
    return [
        f"{year:04d}-{month:02d}-{day:02d}"
        for year in years
        for month in range(0, 14)
        for day in range(0, 33)
    ]


def _times() -> list[str]:
    return [
        f"{hour:02d}:{minute:02d}:{second:02d}.000Z"
        for hour in (0, 9, 19, 23, 24, 29)
        for minute in (0, 59, 60)
        for second in (0, 59, 60, 61)
    ]


def test_the_published_deadline_is_exactly_the_instants_the_server_takes(openapi):
    deadline = openapi["components"]["schemas"]["OpenTaskRequest"]["properties"]["deadline"]
    pattern = re.compile(deadline["pattern"])
    assert deadline["format"] == "date-time"

    texts = [f"{day}T12:00:00.000Z" for day in _days()]
    texts += [f"2024-02-29T{time}" for time in _times()]
    texts += ["2026-05-01T12:00:00Z", "2026-05-01T12:00:00.000+00:00", "2026-05-01 12:00:00.000Z"]
    for text in texts:
        try:
            parse_instant(text)
            real = True
        except ValueError:
            real = False
        assert bool(pattern.fullmatch(text)) == real, text
        request = open_task_request(deadline=text)
        assert OpenTaskRequest.model_validate(request) if real else _refused_deadline(request)


def _refused_deadline(request: dict) -> bool:
    with pytest.raises(ValidationError) as refused_request:
        OpenTaskRequest.model_validate(request)
    return [error["loc"] for error in refused_request.value.errors()] == [("deadline",)]


def test_the_published_room_rule_is_the_servers(openapi):
    """`max_contributors` at least `min_independent`: a cross-field rule, stated in the schema."""
    validator = Draft202012Validator({**openapi, "$ref": "#/components/schemas/OpenTaskRequest"})
    for needed in range(0, 8):
        for room in range(0, 12):
            request = open_task_request(min_independent=needed, max_contributors=room)
            try:
                OpenTaskRequest.model_validate(request)
                taken = True
            except ValidationError:
                taken = False
            assert validator.is_valid(request) == taken, (needed, room)


def test_an_integral_number_is_an_integer_as_json_schema_reads_it(api, poster):
    """JSON Schema's `integer` takes `3.0`; so does the server, on every door."""
    request = open_task_request(min_independent=2.0, max_contributors=3.0)
    payload = open_task_payload(request)

    posted = api.post("/api/a2a-tasks", json=payload, headers=bearer(poster.token))

    assert posted.status_code == 201, posted.text
    view = posted.json()["task"]
    assert (view["min_independent"], view["max_contributors"]) == (2, 3)
    assert view["public_input_digest"] == payload["approval"]["public_input_digest"]


def test_every_link_names_an_operation_and_its_parameters(openapi):
    operations = {
        operation["operationId"]: operation
        for item in openapi["paths"].values()
        for operation in item.values()
    }
    parameters = openapi["components"]["parameters"]
    linked = set()
    for operation in operations.values():
        for response in operation["responses"].values():
            for link in response.get("links", {}).values():
                target = operations[link["operationId"]]
                names = {
                    parameters[ref["$ref"].rsplit("/", 1)[1]]["name"]
                    for ref in target.get("parameters", [])
                }
                assert set(link["parameters"]) <= names, link
                linked.add(link["operationId"])
    starts = {"agent_register", "tasks_mine", "task_post", "log_verifier_key"}
    assert linked == set(operations) - starts


def _conforms(openapi: dict, path: str, method: str, response) -> None:
    """The live answer validates against what the OpenAPI document says of its status."""
    pointer = "/".join(
        [
            "#",
            "paths",
            path.replace("~", "~0").replace("/", "~1"),
            method,
            "responses",
            str(response.status_code),
        ]
    )
    schema = {**openapi, "$ref": pointer + "/content/application~1json/schema"}
    errors = list(Draft202012Validator(schema).iter_errors(response.json()))
    assert errors == [], (path, method, response.status_code, errors[0].message if errors else "")


def test_live_answers_conform_to_the_openapi_document(api, openapi, make_agent, make_call):
    poster, contributor = make_agent(), make_agent()
    call = make_call()
    closed = make_call()
    call_close(call=closed)

    registered = api.post("/api/agent/register", json={})
    _conforms(openapi, "/api/agent/register", "post", registered)
    posted = api.post("/api/a2a-tasks", json=open_task_payload(), headers=bearer(poster.token))
    _conforms(openapi, "/api/a2a-tasks", "post", posted)
    task_id = posted.json()["task"]["id"]
    contributed = api.post(
        f"/api/a2a-tasks/{task_id}/contributions",
        json=contribution_payload(),
        headers=bearer(contributor.token),
    )
    _conforms(openapi, "/api/a2a-tasks/{task_id}/contributions", "post", contributed)
    answered = api.post(
        f"/api/a2a-calls/{call.id}/responses", json=SPEC_CALL_RESPONSE, headers=bearer(poster.token)
    )
    _conforms(openapi, "/api/a2a-calls/{call_id}/responses", "post", answered)

    checks = [
        ("/api/a2a-tasks", "get", api.get("/api/a2a-tasks", params={"limit": 1})),
        ("/api/a2a-tasks/{task_id}", "get", api.get(f"/api/a2a-tasks/{task_id}")),
        (
            "/api/a2a-tasks/mine",
            "get",
            api.get("/api/a2a-tasks/mine", headers=bearer(contributor.token)),
        ),
        ("/api/a2a-calls", "get", api.get("/api/a2a-calls")),
        ("/api/a2a-calls/{call_id}", "get", api.get(f"/api/a2a-calls/{call.id}")),
        ("/api/a2a-tasks", "get", api.get("/api/a2a-tasks", params={"mode": "nope"})),
        ("/api/a2a-tasks/{task_id}", "get", api.get("/api/a2a-tasks/nope")),
        ("/api/a2a-tasks/mine", "get", api.get("/api/a2a-tasks/mine")),
        (
            "/api/a2a-tasks",
            "post",
            api.post("/api/a2a-tasks", json={}, headers=bearer(poster.token)),
        ),
        (
            "/api/a2a-calls/{call_id}/responses",
            "post",
            api.post(
                f"/api/a2a-calls/{closed.id}/responses",
                json=SPEC_CALL_RESPONSE,
                headers=bearer(poster.token),
            ),
        ),
    ]
    for path, method, response in checks:
        _conforms(openapi, path, method, response)
    assert [response.status_code for *_, response in checks][-5:] == [400, 404, 401, 422, 409]
