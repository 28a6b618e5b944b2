"""What every door answers while the database is unreachable (SPEC §16): a prompt, honest
"unavailable, retry shortly" instead of a hang or a traceback. Nothing was written, so a client's
retry with the same operation id is always safe."""

from __future__ import annotations

import logging

import psycopg
from django.db import InterfaceError, OperationalError

from core.errors import ErrorCode, Refusal

RETRY_AFTER_S = 5
MESSAGE = f"the database is unavailable; nothing was changed, retry in {RETRY_AFTER_S} s"

logger = logging.getLogger(__name__)

_OUTAGES = (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError)


def is_outage(exc: BaseException) -> bool:
    """True for the errors of a database that cannot be reached or dropped the connection."""
    return isinstance(exc, _OUTAGES)


def outage_refusal(exc: BaseException) -> Refusal | None:
    """The `unavailable` refusal for an outage, logged without a traceback; None otherwise."""
    if not is_outage(exc):
        return None
    logger.warning(
        "database unavailable: %s", str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    )
    return Refusal(ErrorCode.UNAVAILABLE, MESSAGE, retry_after=RETRY_AFTER_S)
