"""Reads for the operator (SPEC §16), and the sweep's heartbeat, read by `/readyz`."""

from __future__ import annotations

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
    """Tasks whose keypers' releases may still come (§15.8): open by design past their deadline."""
    return Q(keys_pending=True, deadline__gt=now - keys_window())


def overdue(now: datetime) -> Q:
    """Open tasks past their deadline that nothing but the worker's sweep is waiting for."""
    return Q(status=TaskStatus.WORKING, deadline__lte=now) & ~awaiting_keys(now)


def tasks_overdue() -> int:
    return Task.objects.filter(overdue(timezone.now())).count()


def evaluation_lag(bounds: tuple[float, ...]) -> tuple[list[tuple[str, int]], float]:
    """Evaluations' lateness as a Prometheus histogram: cumulative buckets, `+Inf`, seconds' sum."""
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
    cumulative = [(str(bound), row[f"le{i}"]) for i, bound in enumerate(bounds)]
    return [*cumulative, ("+Inf", row["count"])], (row["total"] or timedelta(0)).total_seconds()


def sweep_record(*, evaluated: int) -> None:
    statements.write_all(
        *statements.upserted([Sweep(pk=1, finished_at=now_ms(), evaluated=evaluated)])
    )


def sweep_last_finished() -> datetime | None:
    return Sweep.objects.filter(pk=1).values_list("finished_at", flat=True).first()
