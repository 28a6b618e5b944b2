"""The one skeleton of an agent's write, so no service gets SPEC §6's order wrong: check (nothing
locked), then in one transaction lock the agent, replay, perform, write its rows and the record."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from django.db import transaction

from agents.models import Agent, Operation
from agents.services import Caller, WriteResult, audited
from core import statements
from core.canonical import fingerprint
from core.clock import now_ms
from core.errors import ErrorCode, Issue, Refusal

Checked = TypeVar("Checked")

DAY = timedelta(hours=24)


def daily_cap_issue(cap: int, writes: str) -> Issue:
    return Issue("", ErrorCode.DAILY_CAP, f"at most {cap} {writes} per agent in any 24 hours")


@dataclass(frozen=True)
class Performed:
    """A write's body, the object the audit log names, its rows, and `WriteResult.form`."""

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
    """`request` is what the operation id stands for; `check` refuses what the payload alone shows;
    `perform` runs with the agent's row locked and takes any further lock before it reads."""
    request_digest = fingerprint(request)
    agent = caller.agent

    operation_key = [statements.db_value(Operation, "agent", agent.pk), caller.operation_id]

    def replayed(row: Sequence[Any] | None) -> WriteResult | None:
        """The same id with another request is refused: either answer would hide the mistake."""
        if row is None:
            return None
        stored_kind, stored_digest, result = statements.python_values(Operation, _REPLAYED, row)
        if stored_kind != kind or stored_digest != request_digest:
            raise Refusal(
                ErrorCode.IDEMPOTENCY_CONFLICT,
                "this operation id was already used for a different request",
            )
        return WriteResult(result, replayed=True)

    try:
        checked = check()
    except Refusal:
        # A replay is answered from its record whatever the rules say now (SPEC §6); looked for
        # here only when they refuse, so that a fresh write looks once, under the lock below.
        replay = replayed(statements.fetch_one(_operation_by_id(), operation_key))
        if replay is not None:
            return replay
        raise
    with transaction.atomic():
        with statements.pipelined():
            # Every write of one agent serialises on its row lock, so its caps and operation ids
            # hold; the record is read by the next statement, which starts once it is granted.
            key = [statements.db_value(Agent, "id", agent.pk)]
            statements.lock(Agent, f"{statements.column(Agent, 'id')} = %s", key)
            recorded = statements.sent(_operation_by_id(), operation_key)
        with recorded:
            row = recorded.fetchone()
        if (replay := replayed(row)) is not None:
            return replay
        performed = perform(agent, checked)
        now = now_ms()
        statements.write_all(
            *performed.writes,
            statements.inserted(
                Operation,
                {
                    "agent": agent.pk,
                    "operation_id": caller.operation_id,
                    "kind": kind,
                    "request_digest": request_digest,
                    "result": performed.body,
                    "created_at": now,
                },
            ),
            audited(
                now,
                agent.pk,
                caller.door,
                caller.client[:100],
                kind,
                performed.object_type,
                performed.object_id,
            ),
        )
    return WriteResult(performed.body, form=performed.form)


_REPLAYED = ("kind", "request_digest", "result")


@statements.prepared
def _operation_by_id() -> str:
    return (
        f"SELECT {statements.columns(Operation, _REPLAYED)} FROM {statements.table(Operation)} "
        f"WHERE {statements.column(Operation, 'agent')} = %s "
        f"AND {statements.column(Operation, 'operation_id')} = %s"
    )
