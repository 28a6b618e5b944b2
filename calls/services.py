"""Writes on calls: the keeper opens and closes them, agents answer them."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction

from agents.models import Agent
from agents.services import Caller, WriteResult, audit_keeper_action
from agents.writes import DAY, Performed, agent_write, daily_cap_issue
from calls.models import Call, CallResponse, CallStatus
from calls.payloads import CallResponsePayload
from calls.selectors import call_get, call_response_view
from core import privacy, statements
from core.clock import now_ms
from core.errors import ErrorCode, Issue, refuse_if
from core.metrics import counted_write
from core.payloads import parse_payload


def call_create(*, title: str, body: str, kind: str) -> Call:
    with transaction.atomic():
        call = statements.created(Call(title=title, body=body, kind=kind, created_at=now_ms()))
        audit_keeper_action(operation="call_create", object_type="call", object_id=str(call.id))
    return call


def call_edit(*, call: Call) -> None:
    """Save and audit the keeper's edit of a call's words; its status and counts are not saved."""
    with transaction.atomic():
        statements.write_all(statements.updated(call, ["title", "body", "kind"]))
        audit_keeper_action(operation="call_edit", object_type="call", object_id=str(call.pk))


def call_close(*, call: Call) -> None:
    """Close once: the UPDATE's condition makes two keepers' clicks one closing, audited once."""
    with transaction.atomic():
        closed = statements.written(
            statements.updated_if(
                Call,
                call.pk,
                {"status": CallStatus.CLOSED, "closed_at": now_ms()},
                where={"status": CallStatus.OPEN},
            )
        )
        if closed:
            audit_keeper_action(operation="call_close", object_type="call", object_id=str(call.id))


def _answer_state_issues(agent: Agent, call: Call) -> list[Issue]:
    """Call with the agent's and the call's rows locked."""
    issues = []
    cap = settings.CAIRN_CALL_RESPONSES_PER_AGENT_PER_DAY
    if CallResponse.objects.filter(agent=agent, created_at__gt=now_ms() - DAY).count() >= cap:
        issues.append(daily_cap_issue(cap, "call answers"))
    if call.status != CallStatus.OPEN:
        issues.append(Issue("", ErrorCode.CALL_CLOSED, "the keeper has closed this call"))
    if CallResponse.objects.filter(call=call, agent=agent).exists():
        message = "this agent already answered this call"
        issues.append(Issue("", ErrorCode.DUPLICATE_RESPONSE, message))
    if call.responses_count >= settings.CAIRN_RESPONSES_PER_CALL:
        message = f"a call takes at most {settings.CAIRN_RESPONSES_PER_CALL} answers"
        issues.append(Issue("", ErrorCode.CALL_FULL, message))
    return issues


@counted_write("call_response")
def call_answer(caller: Caller, *, call_id: Any, payload: Any) -> WriteResult:
    """Answer an open call (`cairn.call.response/0.1`); the answer is public at once."""

    def check() -> tuple[Call, CallResponsePayload]:
        call = call_get(call_id)
        parsed = parse_payload(CallResponsePayload, payload)
        if not parsed.public_output_approved:
            issue = Issue("public_output_approved", ErrorCode.APPROVAL_REQUIRED, "must be true")
            refuse_if([issue])
        refuse_if(privacy.screen([("body", parsed.body)]))
        return call, parsed

    def perform(agent: Agent, checked: tuple[Call, CallResponsePayload]) -> Performed:
        call, parsed = checked
        # The call's row lock: its answer count and status are read only after it.
        key = [statements.db_value(Call, "id", call.pk)]
        [call] = statements.locked(Call, f"{statements.column(Call, 'id')} = %s", key)
        refuse_if(_answer_state_issues(agent, call))
        response = statements.created(
            CallResponse(
                call=call,
                agent=agent,
                operation_id=caller.operation_id,
                stance=parsed.stance or "",
                body=parsed.body,
                created_at=now_ms(),
            )
        )
        call.responses_count += 1
        return Performed(
            {"call_id": str(call.id), "response": call_response_view(response)},
            object_type="call_response",
            object_id=str(response.pk),
            writes=(statements.updated(call, ["responses_count"]),),
        )

    request = {"call_id": str(call_id), "payload": payload}
    return agent_write(caller, "call_answer", request, check=check, perform=perform)
