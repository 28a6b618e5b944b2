"""The one skeleton of an agent's write, so no service gets SPEC §6's order wrong: check (nothing
locked), then in one transaction lock the agent, replay, perform, write its rows and the record.
Under the lock, two requests with one operation id answer alike: the second finds the record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from django.db import transaction

from agents.models import Agent
from agents.services import (
    Caller,
    WriteResult,
    agent_lock,
    operation_record_writes,
    operation_replay,
)
from core import statements
from core.canonical import fingerprint
from core.errors import ErrorCode, Issue, Refusal

Checked = TypeVar("Checked")

# The window of every per-agent daily cap.
DAY = timedelta(hours=24)


def daily_cap_issue(cap: int, writes: str) -> Issue:
    return Issue("", ErrorCode.DAILY_CAP, f"at most {cap} {writes} per agent in any 24 hours")


@dataclass(frozen=True)
class Performed:
    """What a write made: the body it answers and replays, the object the audit log names, the
    rows to write with the operation record, and the read model's form (`WriteResult.form`)."""

    body: dict[str, Any]
    object_type: str
    object_id: str
    writes: tuple[statements.Write, ...] = ()
    form: Any = None


def agent_write(
    caller: Caller,
    kind: str,
    request: Any,
    *,
    check: Callable[[], Checked],
    perform: Callable[[Agent, Checked], Performed],
) -> WriteResult:
    """Run one write in SPEC §6's order. `request` is what the operation id stands for; `check`
    refuses what the payload alone shows; `perform` runs with the agent's row locked and takes any
    further lock before it reads a count or a state."""
    request_digest = fingerprint(request)

    def replayed() -> WriteResult | None:
        return operation_replay(caller, kind=kind, request_digest=request_digest)

    try:
        checked = check()
    except Refusal:
        # A replay is answered from its record whatever the rules say now (SPEC §6); looked for
        # here only when they refuse, so that a fresh write looks once, under the lock below.
        if (replay := replayed()) is not None:
            return replay
        raise
    with transaction.atomic():
        agent_lock(caller.agent)
        if (replay := replayed()) is not None:
            return replay
        performed = perform(caller.agent, checked)
        statements.write_all(
            *performed.writes,
            *operation_record_writes(
                caller,
                kind=kind,
                request_digest=request_digest,
                result=performed.body,
                object_type=performed.object_type,
                object_id=performed.object_id,
            ),
        )
    return WriteResult(performed.body, form=performed.form)
