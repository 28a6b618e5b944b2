"""Hostile bytes that once reached a traceback, exactly as they were sent: every door must
answer each with its parse error (SPEC §8.2), never a 5xx and never Python's own error text."""

from __future__ import annotations

import json

# `python3 -c "print('['*1000+']'*1000)" | curl --data-binary @-`: print's newline included.
DEEP_ARRAYS = b"[" * 1000 + b"]" * 1000 + b"\n"
# Two lone surrogates, as JSON escapes: valid syntax, but no Unicode text.
LONE_SURROGATES = rb'{"jsonrpc":"2.0","id":"\ud800","method":"GetTask","params":{"id":"\udfff"}}'
# A 5,000-digit id: past Python's limit on the digits of an integer.
LONG_ID = b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"GetTask","params":{"id":"x"}}'
# Deeply nested params: the envelope is fine, the nesting is further in.
DEEP_PARAMS = (
    b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x","pad":'
    + b"[" * 1000
    + b"]" * 1000
    + b"}}"
)

HOSTILE = {
    "deep arrays": DEEP_ARRAYS,
    "lone surrogates": LONE_SURROGATES,
    "long id": LONG_ID,
    "deep params": DEEP_PARAMS,
}

# What must never reach a client: Python's own words.
PYTHON_TEXTS = ("Traceback", "RecursionError", "Exceeds the limit", "surrogates not allowed")


def nested(depth: int) -> bytes:
    """A GetTask envelope whose whole document nests exactly `depth` levels (the envelope and
    `params` are two of them)."""
    pad = "[" * (depth - 2) + "]" * (depth - 2)
    return (
        f'{{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{{"id":"x","pad":{pad}}}}}'.encode()
    )


def says_nothing_of_python(body: bytes) -> bool:
    text = body.decode("utf-8", "replace")
    return not any(word in text for word in PYTHON_TEXTS) and json.loads(body) is not None
