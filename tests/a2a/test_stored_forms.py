"""The stored A2A forms are the JSON the SDK's serialisers write for one Task, whatever JSON the
view and its evaluation hold: what the SDK's dispatcher writes of the Task the handler parses from
each form is the form itself, compared strictly (a double is `2.0`, never `2`), and a list item
and GetTask are the same protobuf Task."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from a2a.server.routes.common import serialize_list_tasks_response
from a2a.types import ListTasksResponse, Task
from google.protobuf.json_format import MessageToDict, ParseDict
from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_gateway.stored_forms import task_form
from core.clock import format_instant
from tasks.changes import TaskChange
from tasks.models import Outcome
from tests.strict_json import strictly

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


def stored(view: dict[str, Any]) -> tuple[str, str, str]:
    form = task_form(TaskChange(_Row(view), view))
    return form.task_json, form.list_item_json, form.list_item_full_json


class _Row:
    """What the hook reads of a task besides its view: its key and the columns reads filter by."""

    def __init__(self, view: dict[str, Any]) -> None:
        self.pk = view["id"]
        self.status = "working" if view["state"] == "open" else "completed"
        self.status_timestamp = self.deadline = datetime(2026, 6, 1, tzinfo=UTC)
        self.keys_pending = False


def served_by_the_handler(text: str, *, listed: bool = False, include_artifacts: bool = False):
    """What the SDK's dispatcher writes of the Task the handler parses from a stored form."""
    task = ParseDict(json.loads(text), Task())
    if listed:
        return serialize_list_tasks_response(ListTasksResponse(tasks=[task]), include_artifacts)[
            "tasks"
        ][0]
    return MessageToDict(task, preserving_proto_field_name=False)


def assert_one_task_in_every_form(view: dict[str, Any]) -> None:
    task_text, listed, listed_full = stored(view)
    assert strictly(served_by_the_handler(task_text)) == strictly(task_text)
    assert strictly(served_by_the_handler(listed, listed=True)) == strictly(listed)
    full = served_by_the_handler(listed_full, listed=True, include_artifacts=True)
    assert strictly(full) == strictly(listed_full)
    # A list item and GetTask are the same protobuf Task; without artifacts, all but them.
    task = ParseDict(json.loads(task_text), Task())
    assert ParseDict(json.loads(listed_full), Task()) == task
    del task.artifacts[:]
    assert ParseDict(json.loads(listed), Task()) == task


@settings(max_examples=300, deadline=None)
@given(view=views())
def test_every_form_is_the_sdks_json_of_one_task_for_any_json(view):
    assert_one_task_in_every_form(view)


def test_numbers_are_written_as_the_sdk_writes_a_double():
    view = {**EVALUATED, "min_independent": 2, "evaluation": {"counts": {"source_supported": 2}}}
    task_text, listed, listed_full = stored(view)
    assert '"min_independent":2.0' in task_text and '"source_supported":2.0' in task_text
    assert '"min_independent":2.0' in listed and '"source_supported":2.0' in listed_full
    assert '"min_independent":2,' not in task_text + listed + listed_full


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
    assert_one_task_in_every_form(view)


def test_a_str_subclass_is_written_as_its_text():
    view = {**EVALUATED, "outcome": Outcome.CONTESTED, "evaluation": {"outcome": Outcome.CONTESTED}}
    assert '"outcome":"contested"' in stored(view)[0]


def test_instants_are_written_as_protobuf_writes_a_timestamp():
    """Whole seconds without a fraction, else the milliseconds Cairn keeps."""
    for created_at, written in (
        ("2026-06-01T12:00:00.000Z", "2026-06-01T12:00:00Z"),
        ("2026-06-01T12:00:00.120Z", "2026-06-01T12:00:00.120Z"),
    ):
        task_text, _, _ = stored({**OPEN, "created_at": created_at})
        assert json.loads(task_text)["status"]["timestamp"] == written
