"""The sweep's heartbeat: written by the worker after each sweep, read by `/readyz`."""

from __future__ import annotations

from datetime import datetime

from core.clock import now_ms
from tasks.models import Sweep


def sweep_record(*, evaluated: int) -> None:
    Sweep.objects.update_or_create(pk=1, defaults={"finished_at": now_ms(), "evaluated": evaluated})


def sweep_last_finished() -> datetime | None:
    return Sweep.objects.filter(pk=1).values_list("finished_at", flat=True).first()
