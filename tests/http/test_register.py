"""`POST /api/agent/register` (SPEC §2) over HTTP."""

from __future__ import annotations

from agents.models import Agent
from agents.services import agent_for_token
from tests.http.conftest import refused


def test_register_issues_a_bearer_token_shown_once(api):
    response = api.post("/api/agent/register", json={"label": "my research agent"})

    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"agent_id", "token", "token_type"}
    assert body["token_type"] == "Bearer"
    agent = agent_for_token(body["token"])
    assert str(agent.id) == body["agent_id"] and agent.label == "my research agent"
    assert body["token"] not in str(Agent.objects.filter(pk=agent.pk).values().get())


def test_register_takes_an_empty_object_or_no_body(api):
    assert api.post("/api/agent/register", json={}).status_code == 201
    assert api.post("/api/agent/register").status_code == 201


def test_register_refuses_a_label_out_of_bounds(api):
    for label in ("", "x" * 81):
        error = refused(
            api.post("/api/agent/register", json={"label": label}), 422, "invalid_payload"
        )
        assert error["issues"][0]["path"] == "label"
    assert api.post("/api/agent/register", json={"label": "x" * 80}).status_code == 201


def test_register_refuses_an_unknown_field(api):
    error = refused(api.post("/api/agent/register", json={"name": "bot"}), 422, "invalid_payload")
    assert error["issues"][0]["path"] == "name"


def test_register_refuses_a_body_that_is_not_json(api):
    response = api.post(
        "/api/agent/register", content=b"{label", headers={"Content-Type": "application/json"}
    )
    refused(response, 400, "invalid_json")


def test_register_is_rate_limited_per_address(api, settings):
    settings.CAIRN_REGISTRATIONS_PER_IP_PER_HOUR = 2
    assert api.post("/api/agent/register", json={}).status_code == 201
    assert api.post("/api/agent/register", json={}).status_code == 201

    response = api.post("/api/agent/register", json={})

    refused(response, 429, "rate_limited")
    assert 1 <= int(response.headers["Retry-After"]) <= 3601
    assert Agent.objects.count() == 2


def test_a_limit_of_zero_closes_registration_with_a_429(api, settings):
    settings.CAIRN_REGISTRATIONS_PER_IP_PER_HOUR = 0

    response = api.post("/api/agent/register", json={})

    refused(response, 429, "rate_limited")
    assert int(response.headers["Retry-After"]) == 3601
    assert Agent.objects.count() == 0
