"""Cairn's one way of reading and writing instants: UTC, ISO 8601, milliseconds, `Z`."""

from __future__ import annotations

from datetime import UTC, datetime

from django.utils import timezone


def now_ms() -> datetime:
    """The current instant cut to milliseconds, so what is stored is exactly what is shown."""
    now = timezone.now()
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def format_instant(moment: datetime) -> str:
    return (
        moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    )


def parse_instant(text: str) -> datetime:
    """Parse the exact `YYYY-MM-DDTHH:MM:SS.sssZ` form; raise ValueError for anything else."""
    if len(text) != 24 or not text.endswith("Z"):
        raise ValueError("not of the form YYYY-MM-DDTHH:MM:SS.sssZ")
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
