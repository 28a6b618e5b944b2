"""Cairn's one way of reading and writing instants: UTC, ISO 8601, milliseconds, `Z`."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import lru_cache

from django.utils import timezone


def now_ms() -> datetime:
    """The current instant cut to milliseconds, so what is stored is exactly what is shown."""
    now = timezone.now()
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


@lru_cache(maxsize=4096)
def format_instant(moment: datetime) -> str:
    """Cached: an evaluation writes its instant into the view, the evaluation and the log entry,
    and a batch of them holds few distinct instants (equal instants in any zone write alike)."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").removesuffix("+00:00") + "Z"


_INSTANT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z")
# The one form of an instant, as a refusal writes it out for a person.
INSTANT_FORM = "YYYY-MM-DDTHH:MM:SS.sssZ (UTC, such as 2026-05-01T12:00:00.000Z)"
# What pydantic would otherwise quote to an agent as a regular expression.
INSTANT_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"

_YEAR = r"(?:000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})"
_LEAP_YEAR = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_MONTH_DAY = (
    r"(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    r"|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    r"|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\.[0-9]{3}Z"
# Exactly the texts `parse_instant` takes: the form, and a day the calendar has (February 29 in leap
# years only; no year 0, no hour 24, no leap second). The published schemas state it, so a client
# or a fuzzer that follows them never writes an instant the server refuses for its shape.
REAL_INSTANT_PATTERN = f"^(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)T{_TIME}$"


def parse_instant(text: str) -> datetime:
    """Parse the exact `YYYY-MM-DDTHH:MM:SS.sssZ` form; raise ValueError for anything else."""
    if not _INSTANT.fullmatch(text):
        raise ValueError(f"not written as {INSTANT_FORM}")
    return datetime.fromisoformat(text)  # checks the values; reads the Z as UTC


_UNITS = (("day", 86400), ("hour", 3600), ("minute", 60))


def span_words(seconds: int) -> str:
    """Whole seconds in the largest unit that holds them exactly ("30 minutes", "7 days")."""
    unit, count = next(
        ((unit, seconds // size) for unit, size in _UNITS if seconds and seconds % size == 0),
        ("second", seconds),
    )
    return f"{count} {unit}" if count == 1 else f"{count} {unit}s"
