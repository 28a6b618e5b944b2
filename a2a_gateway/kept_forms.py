"""Stored forms kept in memory by a bounded LRU. An evaluated task never changes again (SPEC §4.3)
and none is deleted, so its kept GetTask result cannot go stale (new rendering code is a new
process); open tasks are never kept.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

MAX_CHARS = 4 * 1024 * 1024
_OVERHEAD = 100  # a kept copy's str header and its place in the map, roughly

K = TypeVar("K")
V = TypeVar("V")


class Kept(Generic[K, V]):
    """Values up to `max_size` in all by `size`, the least recently read dropped first. Locked:
    under WSGI each request runs its own event loop on its own thread."""

    def __init__(self, max_size: int, size: Callable[[K, V], int]) -> None:
        self.max_size, self.size = max_size, size
        self._values: OrderedDict[K, V] = OrderedDict()
        self._total = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._values.move_to_end(key)
            return value

    def keep(self, key: K, value: V) -> None:
        size = self.size(key, value)
        if size > self.max_size:
            return
        with self._lock:
            if key in self._values:
                return
            self._values[key] = value
            self._total += size
            while self._total > self.max_size:
                self._total -= self.size(*self._values.popitem(last=False))


def evaluated_forms(max_chars: int = MAX_CHARS) -> Kept[uuid.UUID, str]:
    return Kept(max_chars, lambda _key, text: len(text) + _OVERHEAD)


EVALUATED_FORMS = {"1.0": evaluated_forms(), "0.3": evaluated_forms()}
