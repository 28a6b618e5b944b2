"""The stored A2A forms are the bytes the SDK's serialisers write for the same Task in the same
process: `MessageToDict` of the GetTask result and `serialize_list_tasks_response` of a page,
whatever JSON the view and its evaluation hold and whatever order upb's maps list it in."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from a2a.server.routes.common import serialize_list_tasks_response
from a2a.types import ListTasksResponse
from google.protobuf.json_format import MessageToDict, SerializeToJsonError
from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_gateway.stored_forms import a2a_forms
from a2a_gateway.translate import task_from_view
from core.clock import format_instant
from tasks.models import Outcome
from tasks.rendered import json_text

KEYS = st.text(min_size=1, max_size=12)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=20),
    st.integers(min_value=-(2**60), max_value=2**60),
    st.floats(allow_nan=False, allow_infinity=False),
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=12)),
    max_leaves=40,
)

INSTANTS = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2099, 12, 31), timezones=st.just(UTC)
).map(lambda moment: format_instant(moment.replace(microsecond=moment.microsecond // 1000 * 1000)))

OPEN = {
    "id": "0d7c6b6e-7f0c-4a53-9b46-8a4f8e4c1a01",
    "state": "open",
    "outcome": None,
    "created_at": "2026-06-01T12:00:00.123Z",
    "evaluated_at": None,
    "contributions_received": 2,
}
EVALUATED = {
    **OPEN,
    "state": "evaluated",
    "outcome": "contested",
    "evaluated_at": "2026-06-02T12:00:00.000Z",
}


@st.composite
def views(draw: st.DrawFn) -> dict[str, Any]:
    """A view in any state, at any instant, with any JSON beside its own fields and in its
    evaluation."""
    view: dict[str, Any] = {
        "id": str(draw(st.uuids())),
        "state": "open",
        "outcome": None,
        "created_at": draw(INSTANTS),
        "evaluated_at": None,
    }
    outcome = draw(st.sampled_from([None, "resolved", "contested", "unresolved"]))
    if outcome is not None:
        view.update(state="evaluated", outcome=outcome, evaluated_at=draw(INSTANTS))
    extra = draw(
        st.dictionaries(KEYS.filter(lambda key: key not in view), JSON_VALUES, max_size=20)
    )
    view.update(extra)
    if outcome is not None:
        view["evaluation"] = draw(st.dictionaries(KEYS, JSON_VALUES, max_size=12))
    return view


def sdk_forms(view: dict[str, Any]) -> dict[str, str]:
    """What the SDK's dispatcher writes: GetTask serialises the whole Task, a page without
    `includeArtifacts` the Task built from the view without its evaluation."""
    listed_view = {key: value for key, value in view.items() if key != "evaluation"}
    page = ListTasksResponse(tasks=[task_from_view(listed_view)])
    return {
        "a2a_json": json_text(
            MessageToDict(task_from_view(view), preserving_proto_field_name=False)
        ),
        "a2a_list_json": json_text(serialize_list_tasks_response(page, False)["tasks"][0]),
    }


@settings(max_examples=300, deadline=None)
@given(view=views())
def test_the_forms_are_the_sdks_bytes_for_any_json(view):
    assert a2a_forms(view) == sdk_forms(view)


def test_an_evaluation_of_many_reports_keeps_every_maps_order():
    reports = [
        {
            "contribution_id": f"c{index}",
            "report": {
                "verdict": "supported",
                "summary": "x" * index,
                "evidence": [{"url": f"https://example.org/{index}", "quote": "q", "n": index}],
            },
        }
        for index in range(30)
    ]
    view = {
        **EVALUATED,
        "evaluation": {"counts": {"supported": 30, "refuted": 0}, "contributions": reports},
    }
    assert a2a_forms(view) == sdk_forms(view)


REFUSALS = (ValueError, TypeError, OverflowError, SerializeToJsonError)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 10**400, object(), {1: "a"}])
def test_what_a_struct_refuses_is_refused(value):
    view = {**EVALUATED, "evaluation": {"value": value}}
    with pytest.raises(REFUSALS):
        sdk_forms(view)
    with pytest.raises(REFUSALS):
        a2a_forms(view)


def test_a_str_subclass_is_written_as_its_text():
    view = {**EVALUATED, "outcome": Outcome.CONTESTED, "evaluation": {"outcome": Outcome.CONTESTED}}
    assert a2a_forms(view) == sdk_forms(view)


def test_small_numbers_are_written_as_the_sdks_caller_writes_them():
    """Below 1e-4 orjson writes a float otherwise than `json.dumps` (`0.00001` for `1e-05`)."""
    small = [1e-05, -3e-06, 1e-07, 2.5e-09, 5e-324, 0.0001, 0.0, 1e16]
    view = {**EVALUATED, "weights": small, "evaluation": {"weights": small, "n": 1e-5}}
    forms = a2a_forms(view)
    assert forms == sdk_forms(view)
    assert "1e-05" in forms["a2a_json"] and "1e-05" in forms["a2a_list_json"]
