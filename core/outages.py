"""What every door answers while the database is unreachable (SPEC §16): a prompt "unavailable,
retry shortly" instead of a hang or a traceback; nothing was written, so a retry is safe. The
worker, with no client to retry for it, waits the outage out."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

import psycopg
from django.db import InterfaceError, OperationalError, close_old_connections

from core.errors import ErrorCode, Refusal

RETRY_AFTER_S = 5
MESSAGE = f"the database is unavailable; nothing was changed, retry in {RETRY_AFTER_S} s"

# A wait for the database is logged on its first try and every this many tries after.
_REPORT_EVERY = 10

logger = logging.getLogger(__name__)
Result = TypeVar("Result")

# The errors of a database that cannot be reached or dropped the connection.
OUTAGES = (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError)


def unavailable(outage: BaseException) -> Refusal:
    """The `unavailable` refusal for an outage, logged without a traceback."""
    logger.warning("database unavailable: %s", first_line(outage))
    return Refusal(ErrorCode.UNAVAILABLE, MESSAGE, retry_after=RETRY_AFTER_S)


def outage_refusal(exc: BaseException) -> Refusal | None:
    return unavailable(exc) if isinstance(exc, OUTAGES) else None


def through_outages(job: Callable[[], Result], *, pause: Callable[[], bool], who: str) -> Result:
    """`job()`, tried again on a fresh connection after each outage for as long as `pause()`, which
    waits before the next try, returns True; then the last outage is raised."""
    tries = 0
    while True:
        try:
            return job()
        except OUTAGES as exc:
            if tries % _REPORT_EVERY == 0:
                logger.warning("%s waits for the database: %s", who, first_line(exc))
            tries += 1
            close_old_connections()
            if not pause():
                raise


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
