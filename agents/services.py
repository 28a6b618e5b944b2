"""Tokens, operation records and the audit log: the write plumbing every service shares."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction

from agents.models import Agent, AuditEntry, Door, Operation
from core.clock import now_ms
from core.errors import ErrorCode, Refusal

TOKEN_PREFIX = "cairn_"


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _address_hash(address: str) -> str:
    return hmac.new(settings.SECRET_KEY.encode(), address.encode(), hashlib.sha256).hexdigest()


def agent_register(*, label: str, address: str) -> tuple[Agent, str]:
    """Issue a token. Returns the agent and the token, which is shown once and never stored."""
    now = now_ms()
    window_start = now - timedelta(hours=1)
    address_hash = _address_hash(address)
    with transaction.atomic():
        recent = list(
            Agent.objects.filter(address_hash=address_hash, created_at__gt=window_start)
            .order_by("created_at")
            .values_list("created_at", flat=True)[: settings.CAIRN_REGISTRATIONS_PER_IP_PER_HOUR]
        )
        if len(recent) >= settings.CAIRN_REGISTRATIONS_PER_IP_PER_HOUR:
            oldest = recent[0] if recent else now  # a limit of 0 closes registration
            retry_after = max(1, int((oldest + timedelta(hours=1) - now).total_seconds()) + 1)
            raise Refusal(
                ErrorCode.RATE_LIMITED,
                "too many registrations from this address; try again later",
                retry_after=retry_after,
            )
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        agent = Agent.objects.create(
            token_sha256=token_digest(token), label=label, address_hash=address_hash, created_at=now
        )
    return agent, token


def agent_for_token(token: str) -> Agent | None:
    """The agent a bearer token names; a revoked or unknown token is the same as none."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    return Agent.objects.filter(token_sha256=token_digest(token), revoked_at__isnull=True).first()


def agent_revoke(*, agent: Agent) -> None:
    """The keeper revokes an agent's token, once: revoking it again changes nothing and audits
    nothing. The row lock makes two keepers' clicks one revocation."""
    with transaction.atomic():
        locked = agent_lock(agent)
        if locked.revoked_at is not None:
            return
        locked.revoked_at = agent.revoked_at = now_ms()
        locked.save(update_fields=["revoked_at"])
        audit_keeper_action(operation="agent_revoke", object_type="agent", object_id=str(agent.id))


def agent_lock(agent: Agent) -> Agent:
    """Take the agent's row lock. Every write of one agent serialises on it, so its caps and
    operation ids hold however many requests it sends at once. Call inside a transaction."""
    return Agent.objects.select_for_update().get(pk=agent.pk)


@dataclass(frozen=True)
class WriteResult:
    """What an accepted write answers. `replayed` says it was answered from the operation record."""

    body: dict[str, Any]
    replayed: bool = False


def operation_replay(
    *, agent: Agent, operation_id: str, kind: str, request_digest: str
) -> WriteResult | None:
    """The stored answer of an operation already accepted under this id, or None.

    The same id with another request is refused: the agent reused an id by mistake, and
    answering with either result would hide that.
    """
    operation = Operation.objects.filter(agent=agent, operation_id=operation_id).first()
    if operation is None:
        return None
    if operation.kind != kind or operation.request_digest != request_digest:
        raise Refusal(
            ErrorCode.IDEMPOTENCY_CONFLICT,
            "this operation id was already used for a different request",
            [],
        )
    return WriteResult(operation.result, replayed=True)


def operation_record(
    *,
    agent: Agent,
    operation_id: str,
    kind: str,
    request_digest: str,
    result: Any,
    door: Door,
    client: str,
    object_type: str,
    object_id: str,
) -> None:
    """Record an accepted write for replay and for the keeper's audit log. Call inside its transaction."""
    now = now_ms()
    Operation.objects.create(
        agent=agent,
        operation_id=operation_id,
        kind=kind,
        request_digest=request_digest,
        result=result,
        created_at=now,
    )
    AuditEntry.objects.create(
        at=now,
        agent=agent,
        door=door,
        client=client[:100],
        operation=kind,
        object_type=object_type,
        object_id=object_id,
    )


def audit_keeper_action(*, operation: str, object_type: str, object_id: str) -> None:
    AuditEntry.objects.create(
        at=now_ms(),
        agent=None,
        door=Door.ADMIN,
        operation=operation,
        object_type=object_type,
        object_id=object_id,
    )
