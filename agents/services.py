"""Tokens, callers, write results and the audit log: what every service shares."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction

from agents.models import Agent, AuditEntry, Door
from core import statements
from core.clock import now_ms
from core.errors import ErrorCode, Refusal

TOKEN_PREFIX = "cairn_"


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# A registration's advisory lock: "reg" as an integer, then 32 bits of the address's hash (two
# addresses that share them only wait for each other).
REGISTRATION_LOCK = int.from_bytes(b"reg", "big")


def agent_register(*, label: str, address: str) -> tuple[Agent, str]:
    """Issue a token, shown once and never stored. The count and the insert run under the
    address's lock, so registrations sent at once from one address are counted one by one."""
    address_hash = hmac.new(settings.SECRET_KEY.encode(), address.encode(), "sha256").hexdigest()
    with transaction.atomic():
        address_key = int.from_bytes(bytes.fromhex(address_hash[:8]), "big", signed=True)
        statements.advisory_lock(REGISTRATION_LOCK, address_key)
        now = now_ms()
        recent = list(
            Agent.objects.filter(address_hash=address_hash, created_at__gt=now - timedelta(hours=1))
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
        agent = statements.created(
            Agent(
                token_sha256=token_digest(token),
                label=label,
                address_hash=address_hash,
                created_at=now,
            )
        )
    return agent, token


# What a request's agent carries: every column (a door may show any of them).
_AGENT_FIELDS = ("id", "token_sha256", "label", "address_hash", "created_at", "revoked_at")


def agent_for_token(token: str) -> Agent | None:
    """Every write starts here, so it is one prepared statement (`core.statements`)."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    row = statements.fetch_one(_agent_by_token(), [token_digest(token)])
    return None if row is None else statements.instance(Agent, _AGENT_FIELDS, row)


@statements.prepared
def _agent_by_token() -> str:
    return (
        f"SELECT {statements.columns(Agent, _AGENT_FIELDS)} FROM {statements.table(Agent)} "
        f"WHERE {statements.column(Agent, 'token_sha256')} = %s "
        f"AND {statements.column(Agent, 'revoked_at')} IS NULL"
    )


def agent_revoke(*, agent: Agent) -> None:
    """Revoke once: the UPDATE waits for an agent's write to release the row, and its condition
    makes two keepers' clicks one revocation, audited once."""
    now = now_ms()
    with transaction.atomic():
        revoked = statements.written(
            statements.updated_if(Agent, agent.pk, {"revoked_at": now}, where={"revoked_at": None})
        )
        if not revoked:
            return
        agent.revoked_at = now
        audit_keeper_action(operation="agent_revoke", object_type="agent", object_id=str(agent.id))


@dataclass(frozen=True)
class Caller:
    """Who asks a write: the operation id is what a retry repeats (SPEC §6)."""

    agent: Agent
    operation_id: str
    door: Door
    client: str = ""


@dataclass(frozen=True)
class WriteResult:
    """`replayed`: answered from the operation record. `form`: the read model's form of the task
    the write changed (`tasks.changes.ChangesWritten`); None for a replay or no task changed."""

    body: dict[str, Any]
    replayed: bool = False
    form: Any = None


def audit_keeper_action(*, operation: str, object_type: str, object_id: str) -> None:
    statements.write_all(audited(now_ms(), None, Door.ADMIN, "", operation, object_type, object_id))


def audited(*values: Any) -> statements.Write:
    """The audit log's row of one accepted write, its values in `_AUDITED`'s order."""
    return statements.inserted(AuditEntry, dict(zip(_AUDITED, values, strict=True)))


_AUDITED = ("at", "agent", "door", "client", "operation", "object_type", "object_id")
