"""SPEC §1, §6, §9, §12: everything under /api/ answers JSON — an unknown path, a wrong method, an
Accept that admits no JSON, a body that is not JSON — and the schema index lists what /schemas/a2a/ publishes."""

from __future__ import annotations

import uuid

from tests.hostile import HOSTILE, nested, says_nothing_of_python
from tests.http.conftest import bearer, refused


def test_an_unknown_path_under_api_is_json_404_not_found(api, subtests):
    for method, path in (
        ("GET", "/api/nope"),
        ("GET", "/api/"),
        ("POST", "/api/a2a-tasks/x/y/z"),
        ("GET", "/api/a2a-tasks/"),
        ("DELETE", f"/api/a2a-calls/{uuid.uuid4()}/responses/1"),
        ("GET", "/api/agent"),
    ):
        with subtests.test(method=method, path=path):
            response = api.request(method, path)
            refused(response, 404, "not_found")
            assert response.headers["Content-Type"] == "application/json"
            assert response.headers["X-Content-Type-Options"] == "nosniff"


def test_a_wrong_method_under_api_is_json_405_with_allow(api, subtests):
    for method, path, allowed in (
        ("PUT", "/api/a2a", "GET, HEAD, POST"),
        ("GET", "/api/mcp", "POST"),
        ("DELETE", "/api/openapi.json", "GET, HEAD"),
        ("POST", "/api/openapi.json", "GET, HEAD"),
        ("GET", "/api/agent/register", "POST, OPTIONS"),
        ("PATCH", "/api/a2a-tasks", "GET, POST, HEAD, OPTIONS"),
        ("DELETE", "/api/a2a-tasks/mine", "GET, HEAD, OPTIONS"),
    ):
        with subtests.test(method=method, path=path):
            response = api.request(method, path, content=b"{}")
            error = refused(response, 405, "method_not_allowed")
            assert response.headers["Allow"] == allowed
            assert method in error["message"]


def test_an_accept_that_admits_no_json_is_406_not_acceptable(
    api, poster, post_task, make_call, subtests
):
    task, call = post_task(poster), make_call()
    for method, path in (
        ("GET", "/api/a2a-tasks"),
        ("GET", f"/api/a2a-tasks/{task.pk}"),
        ("GET", "/api/a2a-tasks/mine"),
        ("POST", "/api/a2a-tasks"),
        ("POST", f"/api/a2a-tasks/{task.pk}/contributions"),
        ("GET", f"/api/a2a-calls/{call.pk}"),
        ("POST", "/api/agent/register"),
    ):
        for accept in ("text/html", "application/xml, text/*;q=0.5"):
            with subtests.test(method=method, path=path, accept=accept):
                headers = {**bearer(poster.token), "Accept": accept}
                response = api.request(method, path, content=b"{}", headers=headers)
                error = refused(response, 406, "not_acceptable")
                assert response.headers["Content-Type"] == "application/json"
                assert "application/json" in error["message"]


def test_the_bytes_that_are_not_json_are_400_invalid_json_on_every_write(
    api, poster, post_task, make_agent, make_call, subtests
):
    task = post_task(make_agent())
    call = make_call()
    paths = (
        "/api/a2a-tasks",
        f"/api/a2a-tasks/{task.pk}/contributions",
        f"/api/a2a-calls/{call.pk}/responses",
        "/api/agent/register",
    )
    for name, content in {**HOSTILE, "65 levels": nested(65)}.items():
        for path in paths:
            with subtests.test(name=name, path=path):
                response = api.post(path, content=content, headers=bearer(poster.token))
                refused(response, 400, "invalid_json")
                assert says_nothing_of_python(response.content)


def test_64_levels_are_json_the_rules_then_judge(api, poster):
    response = api.post("/api/a2a-tasks", content=nested(64), headers=bearer(poster.token))

    refused(response, 422, "invalid_payload")


def test_the_schema_index_lists_every_published_schema(api, live_url):
    index = api.get("/schemas/a2a/")

    assert index.status_code == 200 and index.headers["Content-Type"] == "application/json"
    schemas = index.json()["schemas"]
    assert [item["name"] for item in schemas] == [
        "open-task.json",
        "open-task-create.json",
        "task-contribution.json",
        "task-contribution-sealed.json",
        "call-response.json",
    ]
    for item in schemas:
        assert item["url"] == f"{live_url}/schemas/a2a/{item['name']}"
        assert api.get(item["url"]).json()["$id"] == item["$id"] == item["url"]


def test_openapi_says_registration_takes_no_body(api):
    document = api.get("/api/openapi.json").json()
    register = document["paths"]["/api/agent/register"]["post"]

    assert register["requestBody"]["required"] is False
    assert api.post("/api/agent/register").status_code == 201
    required = {
        path: operation["requestBody"]["required"]
        for path, operations in document["paths"].items()
        for operation in operations.values()
        if "requestBody" in operation
    }
    assert {path for path, is_required in required.items() if not is_required} == {
        "/api/agent/register"
    }
