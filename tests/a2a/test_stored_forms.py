"""The stored A2A forms are the JSON the SDK's serialisers write for the same Task:
`MessageToDict` of the GetTask result and `serialize_list_tasks_response` of a page, whatever JSON
the view and its evaluation hold. Compared parsed: how the bytes are written (key order, a
Struct's doubles) is no rule of Cairn's."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from a2a.server.routes.common import serialize_list_tasks_response
from a2a.types import ListTasksResponse
from google.protobuf.json_format import MessageToDict
from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_gateway.read_model import task_forms
from a2a_gateway.translate import task_from_view
from core.clock import format_instant
from tasks.models import Outcome

KEYS = st.text(min_size=1, max_size=12)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=20),
    # A Struct holds every number as a double: integers beyond 2**53 are not JSON it keeps.
    st.integers(min_value=-(2**53), max_value=2**53),
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


def sdk_forms(view: dict[str, Any]) -> tuple[Any, Any]:
    """What the SDK's dispatcher writes: GetTask serialises the whole Task, a page without
    `includeArtifacts` the Task built from the view without its evaluation."""
    listed_view = {key: value for key, value in view.items() if key != "evaluation"}
    page = ListTasksResponse(tasks=[task_from_view(listed_view)])
    return (
        MessageToDict(task_from_view(view), preserving_proto_field_name=False),
        serialize_list_tasks_response(page, False)["tasks"][0],
    )


def stored_forms(view: dict[str, Any]) -> tuple[Any, Any]:
    task_json, list_item_json = task_forms(view)
    return json.loads(task_json), json.loads(list_item_json)


@settings(max_examples=300, deadline=None)
@given(view=views())
def test_the_forms_are_the_sdks_json_for_any_json(view):
    assert stored_forms(view) == sdk_forms(view)


def test_an_evaluation_of_many_reports_is_the_sdks_json():
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
    assert stored_forms(view) == sdk_forms(view)


def test_a_str_subclass_is_written_as_its_text():
    view = {**EVALUATED, "outcome": Outcome.CONTESTED, "evaluation": {"outcome": Outcome.CONTESTED}}
    assert stored_forms(view) == sdk_forms(view)


def test_instants_are_written_as_protobuf_writes_a_timestamp():
    """Whole seconds without a fraction, else the milliseconds Cairn keeps."""
    for created_at in ("2026-06-01T12:00:00.000Z", "2026-06-01T12:00:00.120Z"):
        view = {**OPEN, "created_at": created_at}
        assert stored_forms(view) == sdk_forms(view)
