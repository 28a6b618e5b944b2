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
    """`isoformat` runs in half `strftime`'s time, and every view, receipt and log entry writes
    instants: an evaluation writes its instant into the view, the evaluation and the log entry,
    and a batch of them holds few distinct instants, so each is written once (a datetime is
    immutable, and equal instants in other zones write the same text)."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").removesuffix("+00:00") + "Z"


_INSTANT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z")


def parse_instant(text: str) -> datetime:
    """Parse the exact `YYYY-MM-DDTHH:MM:SS.sssZ` form; raise ValueError for anything else."""
    if not _INSTANT.fullmatch(text):
        raise ValueError("not of the form YYYY-MM-DDTHH:MM:SS.sssZ")
    return datetime.fromisoformat(text)  # checks the values; reads the Z as UTC
