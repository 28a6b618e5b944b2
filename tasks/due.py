"""When a task is due for evaluation (SPEC §4.3, §15.8), as a check on a loaded task or as SQL
over any table holding its `status`, `deadline` and `keys_pending`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from django.db.models import Model
from django.utils import timezone

from core import statements
from tasks.models import Task, TaskStatus


@dataclass(frozen=True)
class OpenPastDeadline:
    """Open and past its deadline; `awaiting_keys_too`: also while awaiting its keypers."""

    awaiting_keys_too: bool

    def holds(self, task: Task, now: datetime) -> bool:
        return (
            task.status == TaskStatus.WORKING
            and task.deadline <= now
            and (self.awaiting_keys_too or not task.keys_pending)
        )

    def sql(self, model: type[Model]) -> str:
        return _sql(statements.vendor(), model, self.awaiting_keys_too)

    def any_sql(self) -> str:
        """Whether any task holds the rule, asked as the earliest such deadline: read off `task_due`
        whatever the statistics say, where "does any exist" may plan a scan of the whole table."""
        return _any_sql(statements.vendor(), self.awaiting_keys_too)

    @staticmethod
    def params(now: Any) -> dict[str, Any]:
        """`now` as its connection takes a deadline (`statements.db_value`)."""
        return {"working": TaskStatus.WORKING.value, "now": now}

    def any_now(self) -> bool:
        now = statements.db_value(Task, "deadline", timezone.now())
        found = statements.fetch_one("SELECT " + self.any_sql(), self.params(now))
        return found is not None and bool(found[0])


@cache
def _sql(vendor: str, model: type[Model], awaiting_keys_too: bool) -> str:
    status, deadline, keys_pending = (
        statements.column(model, name) for name in ("status", "deadline", "keys_pending")
    )
    open_past = f"{status} = %(working)s AND {deadline} <= %(now)s"
    return f"({open_past})" if awaiting_keys_too else f"({open_past} AND NOT {keys_pending})"


@cache
def _any_sql(vendor: str, awaiting_keys_too: bool) -> str:
    deadline = statements.column(Task, "deadline")
    where = _sql(vendor, Task, awaiting_keys_too)
    return f"(SELECT MIN({deadline}) FROM {statements.table(Task)} WHERE {where}) IS NOT NULL"


# Due for evaluation. A task awaiting its keypers is left to the worker: a read never waits on it.
DUE = OpenPastDeadline(awaiting_keys_too=False)
# What a replica may show open after the primary evaluated it: a read of it goes to the primary.
PAST_DEADLINE = OpenPastDeadline(awaiting_keys_too=True)
