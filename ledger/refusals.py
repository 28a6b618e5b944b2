"""Why a witness does not cosign (SPEC §15.4) or a keyper does not release (§15.8): one vocabulary,
since a keyper is a witness and the same case is the same refusal at either door. The value is the
code a refusal's body carries; each door gives it a status (`http_api.witness.STATUS`)."""

from __future__ import annotations

import enum


class Refused(enum.Enum):
    MALFORMED = "malformed"
    UNKNOWN_LOG = "not_found"
    BAD_SIGNATURE = "bad_signature"
    SHARE_DOES_NOT_OPEN = "share_does_not_open"
    STALE_OLD_SIZE = "stale_old_size"
    INCONSISTENT = "inconsistent"
    NOT_PROVEN = "not_proven"
    TOO_EARLY = "too_early"


class WitnessRefusal(Exception):
    """`path` names a request's field at fault, and begins the reason; `not_before` is when a
    keyper will release; `size` is the witness's own size, when the old size was stale."""

    def __init__(
        self,
        kind: Refused,
        reason: str,
        *,
        path: str = "",
        not_before: str | None = None,
        size: int | None = None,
    ) -> None:
        self.reason = f"{path}: {reason}" if path else reason
        super().__init__(self.reason)
        self.kind = kind
        self.path = path
        self.not_before = not_before
        self.size = size
