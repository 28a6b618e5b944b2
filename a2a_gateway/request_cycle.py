"""Django's request signals around an A2A request's ORM work, for callers outside Django's request
cycle. A hop costs more than the statement it runs, so they ride the first and last work's hops.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.core import signals

from core.orm_threads import orm_hop

Result = TypeVar("Result")


class DjangoCycle:
    """One request's cycle; `inside_already`: a Django view, which sends the signals itself."""

    def __init__(self, *, inside_already: bool) -> None:
        self.inside_already = inside_already
        self.started = False

    async def call(self, work: Callable[..., Result], *args: Any, last: bool = False) -> Result:
        """`work(*args)` on its ORM thread, inside the cycle; `last`: leave it in the same hop."""
        return await orm_hop(self._run)(work, args, last)

    async def enter(self) -> None:
        """Before work that reaches the ORM thread on its own (the SDK's dispatcher)."""
        if not self.inside_already and not self.started:
            await orm_hop(self._enter)()

    async def leave(self) -> None:
        if self.started:
            await orm_hop(self._leave)()

    def _run(self, work: Callable[..., Result], args: tuple[Any, ...], last: bool) -> Result:
        self._enter()
        try:
            return work(*args)
        finally:
            if last:
                self._leave()

    def _enter(self) -> None:
        if not self.inside_already and not self.started:
            self.started = True
            signals.request_started.send(sender=DjangoCycle)

    def _leave(self) -> None:
        if self.started:
            self.started = False
            signals.request_finished.send(sender=DjangoCycle)
