"""The GetTask results of evaluated tasks, kept in the process's memory: an evaluated task never
changes again (SPEC §4.3) and no task is deleted, so a kept copy cannot go stale (new rendering
code is a new process). Open tasks are never kept: a contribution changes them.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict

MAX_CHARS = 4 * 1024 * 1024
_OVERHEAD = 100  # a kept copy's str header and its place in the map, roughly


class EvaluatedForms:
    """Copies by task id, up to `max_chars` in all, the least recently read dropped first. Safe to
    share between threads: under WSGI each request runs its own event loop on its own thread."""

    def __init__(self, max_chars: int = MAX_CHARS) -> None:
        self.max_chars = max_chars
        self._texts: OrderedDict[uuid.UUID, str] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, key: uuid.UUID) -> str | None:
        with self._lock:
            text = self._texts.get(key)
            if text is not None:
                self._texts.move_to_end(key)
            return text

    def keep(self, key: uuid.UUID, text: str) -> None:
        size = len(text) + _OVERHEAD
        if size > self.max_chars:
            return
        with self._lock:
            if key in self._texts:
                return
            self._texts[key] = text
            self._chars += size
            while self._chars > self.max_chars:
                _, dropped = self._texts.popitem(last=False)
                self._chars -= len(dropped) + _OVERHEAD


EVALUATED_FORMS = {"1.0": EvaluatedForms(), "0.3": EvaluatedForms()}
