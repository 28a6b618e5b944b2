"""What counts as JSON from a client, for every door (SPEC §8.2, §6). Python's parser takes some
bytes that are no usable JSON (a lone surrogate, which no database or hash can hold) and fails on
others with errors that are not about syntax (deep nesting, its digit limit): every door answers
them alike, with a parse error that says what is wrong, never a server error."""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 64
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class InvalidJson(ValueError):
    """The bytes are not JSON Cairn reads; the text says why, for the client."""


def _no_constant(name: str) -> Any:
    raise InvalidJson(f"{name} is not JSON")


def _too_deep(value: Any) -> bool:
    stack = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > MAX_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def parse_json(raw: bytes) -> Any:
    """The JSON value of `raw`, or `InvalidJson` saying why not."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidJson("the body is not UTF-8") from None
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except InvalidJson:
        raise
    except json.JSONDecodeError as error:
        raise InvalidJson(f"the body is not JSON: {error}") from None
    except RecursionError:
        raise InvalidJson(f"the body nests deeper than {MAX_DEPTH} levels") from None
    except ValueError:  # Python's limit on the digits of an integer
        raise InvalidJson(
            "the body holds a number with more digits than JSON here allows"
        ) from None
    # Counting brackets first keeps the walk off every ordinary body.
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and _too_deep(value):
        raise InvalidJson(f"the body nests deeper than {MAX_DEPTH} levels")
    if _SURROGATE_ESCAPE.search(raw):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidJson(
                "the body holds a lone surrogate (\\ud800 to \\udfff unpaired)"
            ) from None
    return value


def ints_from_doubles(value: Any) -> Any:
    """Integral floats as ints: JSON's `2.0` and `2` are one value (JSON Schema's `integer` takes
    both, RFC 8785 writes `2`), which the strict payload models would tell apart. A2A's Struct
    sends every number as a double, and a client may write `2.0` by hand."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: ints_from_doubles(item) for key, item in value.items()}
    if isinstance(value, list):
        return [ints_from_doubles(item) for item in value]
    return value
