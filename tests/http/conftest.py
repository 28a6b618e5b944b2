"""Fixtures for the plain HTTP routes: a real client against the live server, and small helpers."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from calls.models import Call
from calls.services import call_create
from core.clock import parse_instant
from tests.a2a.conftest import evaluated_id  # noqa: F401  (a fixture)


@pytest.fixture
def api(http: httpx.Client) -> httpx.Client:
    return http


@pytest.fixture
def make_call(db) -> Callable[..., Call]:
    def make(
        title: str = "Which A2A transports should Cairn document next?", kind: str = "feedback"
    ) -> Call:
        return call_create(
            title=title, body="Tell us which transport you use and why it matters.", kind=kind
        )

    return make


def refused(response: httpx.Response, status: int, code: str, case: Any = "") -> dict[str, Any]:
    """Assert a SPEC §6 refusal (`case` names the input in a failure); returns its `error` object."""
    assert response.status_code == status, (case, response.text)
    error = response.json()["error"]
    assert error["code"] == code, (case, error)
    assert isinstance(error["message"], str) and isinstance(error["issues"], list)
    return error


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def wait_past(deadline: str) -> None:
    """Sleep until just after a deadline written as SPEC time."""
    remaining = (parse_instant(deadline) - datetime.now(UTC)).total_seconds()
    time.sleep(max(0.0, remaining) + 0.05)
