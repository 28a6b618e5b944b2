"""The domain's refusal: one exception, one code enum, translated once per door."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum


class ErrorCode(StrEnum):
    """Refusal codes of SPEC §6. They are stable API: clients branch on them."""

    UNKNOWN_SCHEMA = "unknown_schema"
    INVALID_PAYLOAD = "invalid_payload"
    APPROVAL_REQUIRED = "approval_required"
    PREVIEW_CHANGED = "preview_changed"
    SOURCE_NOT_ALLOWED = "source_not_allowed"
    SOURCE_NOT_IN_TASK = "source_not_in_task"
    DEADLINE_OUT_OF_RANGE = "deadline_out_of_range"
    PRIVATE_CONTENT = "private_content"
    OWN_TASK = "own_task"
    DUPLICATE_CONTRIBUTION = "duplicate_contribution"
    TASK_FULL = "task_full"
    DAILY_CAP = "daily_cap"
    OPEN_TASK_CAP = "open_task_cap"
    CALL_CLOSED = "call_closed"
    DUPLICATE_RESPONSE = "duplicate_response"
    CALL_FULL = "call_full"
    TASK_CLOSED = "task_closed"
    IDEMPOTENCY_CONFLICT = "idempotency_conflict"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    NOT_ACCEPTABLE = "not_acceptable"
    INVALID_QUERY = "invalid_query"
    INVALID_JSON = "invalid_json"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    UNAUTHORIZED = "unauthorized"
    RATE_LIMITED = "rate_limited"
    UNAVAILABLE = "unavailable"


@dataclass(frozen=True)
class Issue:
    """One problem found in a payload; `path` is a JSON path into it ("" for the whole)."""

    path: str
    code: ErrorCode
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "code": str(self.code), "message": self.message}


@dataclass
class Refusal(Exception):
    """A write or read Cairn will not serve. Raising it inside a service rolls the write back."""

    code: ErrorCode
    message: str
    issues: list[Issue] = field(default_factory=list)
    retry_after: int | None = None

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def as_body(self) -> dict:
        """The `{"error": {...}}` body every door shows (SPEC §6)."""
        return {
            "error": {
                "code": str(self.code),
                "message": self.message,
                "issues": [issue.as_dict() for issue in self.issues],
            }
        }


def refuse_if(issues: list[Issue]) -> None:
    """Refuse with every issue of a failing stage; the code is that of the first (SPEC §6)."""
    if not issues:
        return
    first = issues[0]
    message = f"{first.path}: {first.message}" if first.path else first.message
    if len(issues) > 1:
        message += f" (and {len(issues) - 1} more)"
    raise Refusal(first.code, message, list(issues))


def invalid_query(name: str, message: str, *, subject: str = "") -> Refusal:
    """`name`'s issue; the refusal's message reads `<subject, or name> <message>`."""
    issue = Issue(name, ErrorCode.INVALID_QUERY, message)
    return Refusal(ErrorCode.INVALID_QUERY, f"{subject or name} {message}", [issue])


def method_not_allowed(method: str, allowed: Iterable[str]) -> Refusal:
    """A request with a method the path does not take; the door also names them in `Allow`."""
    return Refusal(
        ErrorCode.METHOD_NOT_ALLOWED,
        f"{method} is not allowed here (allowed: {', '.join(allowed)})",
    )
