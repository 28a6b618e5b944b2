"""The exact number of tasks per status (`TaskCount`), changed only inside the transactions that
post or evaluate tasks, read by the lists for their `totalSize`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from django.db import connection
from django.db.models import Sum

from tasks.models import TaskCount


def task_count_change(deltas: Mapping[str, int]) -> None:
    """Add each delta to its status's count, in the caller's transaction. An upsert, so a count
    appears with its first task; statuses in a fixed order, so two writers never deadlock."""
    table = connection.ops.quote_name(TaskCount._meta.db_table)
    sql = (
        f"INSERT INTO {table} (status, count) VALUES (%s, %s) "
        f"ON CONFLICT (status) DO UPDATE SET count = {table}.count + excluded.count"
    )
    rows = [(str(status), delta) for status, delta in sorted(deltas.items()) if delta]
    if rows:
        with connection.cursor() as cursor:
            cursor.executemany(sql, rows)


def task_count(statuses: Iterable[str] | None) -> int:
    """Tasks in any of these statuses (all tasks for None)."""
    counts = TaskCount.objects.all()
    if statuses is not None:
        counts = counts.filter(status__in=list(statuses))
    return counts.aggregate(total=Sum("count"))["total"] or 0
