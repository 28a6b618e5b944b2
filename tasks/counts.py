"""The exact number of tasks per status (`TaskCount`), read by the lists for their `totalSize`."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from functools import cache

from core import statements
from tasks.models import TaskCount


def task_count_change(deltas: Mapping[str, int]) -> None:
    """In the caller's transaction; statuses in a fixed order, so two writers never deadlock."""
    rows = [(str(status), delta) for status, delta in sorted(deltas.items()) if delta]
    statements.write_all(
        *statements.rows_upserted(TaskCount, ("status", "count"), rows, added=("count",))
    )


@cache
def _total_sql(vendor: str, statuses: int | None) -> str:
    where = ""
    if statuses is not None:
        names = ", ".join(f"%(status{index})s" for index in range(statuses))
        where = f" WHERE {statements.column(TaskCount, 'status')} IN ({names})"
    return (
        f"(SELECT COALESCE(SUM({statements.column(TaskCount, 'count')}), 0) "
        f"FROM {statements.table(TaskCount)}{where})"
    )


def total_sql(statuses: int | None) -> str:
    """The count of tasks in `statuses` statuses (None: all) as a subquery; see `total_params`."""
    return _total_sql(statements.vendor(), statuses)


def total_params(statuses: Iterable[str] | None) -> dict[str, str]:
    return {} if statuses is None else {f"status{i}": s for i, s in enumerate(sorted(statuses))}


def task_count(statuses: Collection[str] | None) -> int:
    row = statements.fetch_one(
        "SELECT " + total_sql(None if statuses is None else len(statuses)), total_params(statuses)
    )
    return int(row[0]) if row is not None else 0
