"""RFC 8785 digests: the approval a person gives is checked against exactly these bytes."""

from __future__ import annotations

import hashlib

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from core.canonical import canonical_digest, canonical_json
from tasks.models import Outcome, TaskStatus
from tasks.rendered import task_view
from tests.factories import open_task_payload, open_task_request, task_request


@pytest.mark.parametrize(
    "value, canonical",
    [
        # Vectors from RFC 8785 §3.2.2 and appendix B.
        ({"b": 1, "a": 2}, '{"a":2,"b":1}'),
        ([56, {"d": True, "10": None, "1": []}], '[56,{"1":[],"10":null,"d":true}]'),
        (
            {"numbers": [333333333.33333329, 1e30, 4.50, 2e-3, 0.000000000000000000000000001]},
            '{"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27]}',
        ),
        ({"string": '\u20ac$\u000f\nA\'B"\\\\"/'}, '{"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'),
        (
            {
                "\u20ac": "Euro Sign",
                "\r": "Carriage Return",
                "\ufb33": "Hebrew",
                "1": "One",
                "\U0001f600": "Emoji",
                "\u0080": "Control",
                "\u00f6": "Latin",
            },
            '{"\\r":"Carriage Return","1":"One","\u0080":"Control","ö":"Latin","€":"Euro Sign",'
            '"\U0001f600":"Emoji","\ufb33":"Hebrew"}',
        ),
    ],
)
def test_rfc8785_vectors(value, canonical):
    assert rfc8785.dumps(value).decode() == canonical
    assert canonical_digest(value) == "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def test_non_ascii_text_is_hashed_as_utf8_without_escapes():
    request = open_task_request(
        title="Überprüfung: Does the naïve parser accept “smart quotes” — 日本語?"
    )
    expected = rfc8785.dumps(request)
    assert "日本語".encode() in expected
    assert canonical_digest(request) == "sha256:" + hashlib.sha256(expected).hexdigest()


def test_anyone_can_recompute_the_digest_from_the_public_view(poster, post_task):
    request = open_task_request(
        question="Does the naïve reader of “json_rpc_transport.ts” set A2A-Version?"
    )
    task = post_task(poster, open_task_payload(request))
    view = task_view(task)
    assert canonical_digest(task_request(view)) == view["public_input_digest"]


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=25,
)


def _written(write, value):
    try:
        return write(value)
    except Exception as error:
        return type(error)


@settings(max_examples=2000, deadline=None)
@given(_json_values)
def test_canonical_json_writes_every_value_as_rfc8785_does(value):
    """The C encoder's shortcut and the reference give the same bytes, or refuse alike."""
    assert _written(canonical_json, value) == _written(rfc8785.dumps, value)


@pytest.mark.parametrize(
    "value",
    [
        {"lone": "\ud800"},
        {"big": 2**53},
        {"ctl": "\x00\x1f\x7f\u2028\u2029"},
        {"\U0001f600": 1, "\ufb33": 2},
        [True, False, None, 0, -0.0, 1.0],
        {"outcome": Outcome.CONTESTED, "status": [TaskStatus.WORKING]},
    ],
)
def test_canonical_json_at_the_shortcuts_edges(value):
    assert _written(canonical_json, value) == _written(rfc8785.dumps, value)
