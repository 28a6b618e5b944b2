"""When a task is due for evaluation: open, past its deadline, and not awaiting its keypers
(SPEC §4.3, §15.8), as a check on a loaded task or as SQL over any table holding its `status`,
`deadline` and `keys_pending`. A task awaiting its keypers is left to the worker, so a read never
waits on its row; replica routing asks the wider `PAST_DEADLINE`, as a replica may show such a
task open after the primary evaluated it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from django.db import connection
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
        """The rule over `model`'s columns, as a boolean expression; its params are `params`."""
        return _sql(connection.vendor, model, self.awaiting_keys_too)

    def any_sql(self) -> str:
        """Whether any task holds the rule, as a boolean expression (`params`). Asked as the
        earliest such deadline, it is read off the `task_due` index whatever the statistics say,
        passing at most the tasks still in their grace; asked as "does any open task have
        `deadline <= now`", PostgreSQL may plan a scan of the whole table."""
        return _any_sql(connection.vendor, self.awaiting_keys_too)

    @staticmethod
    def params(now: Any) -> dict[str, Any]:
        """The SQL's params; `now` as its connection takes a deadline (`statements.db_value`)."""
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


# Due for evaluation: what the sweep evaluates, and what a read has the domain evaluate first.
DUE = OpenPastDeadline(awaiting_keys_too=False)
# What a replica may show open after the primary evaluated it: a read of it goes to the primary.
PAST_DEADLINE = OpenPastDeadline(awaiting_keys_too=True)
