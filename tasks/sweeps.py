"""The sweep's heartbeat: written by the worker after each sweep, read by `/readyz`."""

from __future__ import annotations

from datetime import datetime

from core import statements
from core.clock import now_ms
from tasks.models import Sweep


def sweep_record(*, evaluated: int) -> None:
    statements.write_all(
        *statements.upserted([Sweep(pk=1, finished_at=now_ms(), evaluated=evaluated)])
    )


def sweep_last_finished() -> datetime | None:
    return Sweep.objects.filter(pk=1).values_list("finished_at", flat=True).first()
