"""Reads for the operator (SPEC §16): tasks per status, how many are overdue, how late the
evaluations were, exact whichever process asks; and the sweep's heartbeat, written by the worker
after each sweep and read by `/readyz`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, Sum
from django.utils import timezone

from core import statements
from core.clock import now_ms
from tasks.models import Sweep, Task, TaskCount, TaskStatus
from tasks.opening import keys_window


def tasks_per_status() -> dict[str, int]:
    counts = dict(TaskCount.objects.values_list("status", "count"))
    return {status: counts.get(status, 0) for status in TaskStatus.values}


def awaiting_keys(now: datetime) -> Q:
    """Tasks whose deadline has passed and whose keypers' releases may still come (§15.8): they
    stay open by design until the releases are in or the grace is over."""
    return Q(keys_pending=True, deadline__gt=now - keys_window())


def overdue(now: datetime) -> Q:
    """Open tasks past their deadline that nothing but the worker's sweep is waiting for."""
    return Q(status=TaskStatus.WORKING, deadline__lte=now) & ~awaiting_keys(now)


def tasks_overdue() -> int:
    """What the worker keeps at zero within a minute."""
    return Task.objects.filter(overdue(timezone.now())).count()


@dataclass(frozen=True)
class LagHistogram:
    """How late evaluations came: cumulative counts at most `bounds[i]` seconds after the
    deadline, with their sum and count (a Prometheus histogram's parts)."""

    bounds: tuple[float, ...]
    cumulative: tuple[int, ...]
    total_seconds: float
    count: int


def evaluation_lag(bounds: tuple[float, ...]) -> LagHistogram:
    lag = ExpressionWrapper(F("evaluated_at") - F("deadline"), output_field=DurationField())
    buckets = {
        f"le{i}": Count("pk", filter=Q(lag__lte=timedelta(seconds=bound)))
        for i, bound in enumerate(bounds)
    }
    row = (
        Task.objects.filter(evaluated_at__isnull=False)
        .annotate(lag=lag)
        .aggregate(count=Count("pk"), total=Sum("lag"), **buckets)
    )
    total = row["total"] or timedelta(0)
    return LagHistogram(
        bounds,
        tuple(row[f"le{i}"] for i in range(len(bounds))),
        total.total_seconds(),
        row["count"],
    )


def sweep_record(*, evaluated: int) -> None:
    statements.write_all(
        *statements.upserted([Sweep(pk=1, finished_at=now_ms(), evaluated=evaluated)])
    )


def sweep_last_finished() -> datetime | None:
    return Sweep.objects.filter(pk=1).values_list("finished_at", flat=True).first()
