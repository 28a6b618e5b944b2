"""RFC 8785 digests: the approval a person gives is checked against exactly these bytes."""

from __future__ import annotations

import hashlib

import pytest
import rfc8785

from core.canonical import canonical_digest
from tasks.selectors import task_request, task_view
from tests.factories import open_task_payload, open_task_request


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
