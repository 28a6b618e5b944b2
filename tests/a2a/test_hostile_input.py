"""SPEC §8.2: any body that is not valid JSON, however it fails, is -32700 on both adapters; the
server never answers 5xx to a client's bytes, nor shows Python's own error text."""

from __future__ import annotations

from tests.a2a.conftest import error_of, message
from tests.hostile import HOSTILE, nested, says_nothing_of_python

HEADERS = {"Content-Type": "application/json", "A2A-Version": "1.0"}


def test_the_bytes_that_once_crashed_the_endpoint_are_parse_errors(http, poster, subtests):
    for name, content in HOSTILE.items():
        for headers in (HEADERS, {**HEADERS, "Authorization": f"Bearer {poster.token}"}):
            with subtests.test(name=name, token="Authorization" in headers):
                response = http.post("/api/a2a", content=content, headers=headers)
                error = error_of(response, -32700)
                assert response.json()["id"] is None
                assert isinstance(error["message"], str)
                assert says_nothing_of_python(response.content)


def test_nesting_is_read_to_64_levels_and_refused_past_them(http):
    read = http.post("/api/a2a", content=nested(64), headers=HEADERS)
    refused = http.post("/api/a2a", content=nested(65), headers=HEADERS)

    error_of(read, -32001)  # parsed, then answered: no task has the id "x"
    assert "64" in error_of(refused, -32700)["message"]


def test_a_surrogate_pair_is_a_character_and_an_escaped_backslash_is_no_surrogate(http):
    for content in (
        rb'{"jsonrpc":"2.0","id":"\ud83d\ude00","method":"GetTask","params":{"id":"x"}}',
        rb'{"jsonrpc":"2.0","id":"\\ud800","method":"GetTask","params":{"id":"x"}}',
    ):
        response = http.post("/api/a2a", content=content, headers=HEADERS)
        error_of(response, -32001)
        assert response.json()["id"] in ("\U0001f600", "\\ud800")


def test_a_payload_too_deep_for_protobuf_but_within_64_levels_is_invalid_params(rpc, poster):
    """protobuf reads a data part to 100 of its own levels, two per JSON level: past about 50
    the SDK's parser refuses the params, which is a protocol answer too."""
    deep: list = []
    for _ in range(55):
        deep = [deep]
    sent = message({"schema": "cairn.open_task/0.1", "x": deep})

    error = error_of(rpc("SendMessage", {"message": sent}, token=poster.token), -32602)

    assert error["message"] == "Invalid params"
