"""A binding's own form of each task's stored form, converted once and kept while the stored form
is the same.

A2A 0.3's tasks/get answers the stored Task converted by the SDK's 0.3 conversion, which costs
ten times the read itself (pure-Python protobuf JSON, then pydantic). A task's stored form changes
at most a few times, so each task's conversion is kept beside the stored form it came from and
used again only for that same form: it cannot go stale, whether the task is open or evaluated.

The copies are bounded by their total length, the least recently read going first, as
`a2a_gateway.evaluated_forms` bounds its own.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable

from a2a_gateway.evaluated_forms import MAX_CHARS

_OVERHEAD = 150  # a kept pair's tuple and its place in the map, roughly


class ConvertedForms:
    """`convert` of each task's stored form, by task id, up to `max_chars` in all (both forms
    counted). Safe to share between threads, as `EvaluatedForms` is."""

    def __init__(self, convert: Callable[[str], str], max_chars: int = MAX_CHARS) -> None:
        self.convert = convert
        self.max_chars = max_chars
        self._pairs: OrderedDict[uuid.UUID, tuple[str, str]] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def of(self, key: uuid.UUID, stored: str) -> str:
        """The converted form of `stored`, the task's stored form as just read."""
        with self._lock:
            pair = self._pairs.get(key)
            if pair is not None and pair[0] == stored:
                self._pairs.move_to_end(key)
                return pair[1]
        converted = self.convert(stored)
        self._keep(key, (stored, converted))
        return converted

    def _keep(self, key: uuid.UUID, pair: tuple[str, str]) -> None:
        size = _size(pair)
        if size > self.max_chars:
            return
        with self._lock:
            replaced = self._pairs.pop(key, None)
            if replaced is not None:
                self._chars -= _size(replaced)
            self._pairs[key] = pair
            self._chars += size
            while self._chars > self.max_chars:
                _, dropped = self._pairs.popitem(last=False)
                self._chars -= _size(dropped)


def _size(pair: tuple[str, str]) -> int:
    return len(pair[0]) + len(pair[1]) + _OVERHEAD
