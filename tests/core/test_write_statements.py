"""How many SQL statements a contribution costs: the hot write of the benchmark (bench/README.md,
F7). The rules stay in the service; this holds the count they need."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext


def test_a_contribution_costs_five_statements_nine_on_sqlite(
    poster, post_task, contribute, make_agent
):
    task = post_task(poster)
    contributor = make_agent()

    with CaptureQueriesContext(connection) as queries:
        contribute(contributor, task)

    statements = [
        query["sql"]
        for query in queries
        if not query["sql"].startswith(("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE SAVEPOINT"))
    ]
    # PostgreSQL takes the contribution, the log entry, the task's count, the operation record
    # and its audit entry as one statement.
    expected = 5 if connection.vendor == "postgresql" else 9
    assert len(statements) == expected, "\n".join(statements)
