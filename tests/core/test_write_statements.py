"""How many SQL statements a contribution costs: the hot write of the benchmark (bench/README.md,
F7). The rules stay in the service; this holds the count they need."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.conftest import postgres_only


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


@postgres_only("prepared statements are PostgreSQL's")
def test_a_connection_prepares_the_statements_it_runs_again(post_task, contribute, make_agent):
    """Every write plans its statements anew unless psycopg prepares them, which Django's
    backend never does by default (bench/README.md, F42)."""
    for _ in range(6):
        contribute(make_agent(), post_task(make_agent()))

    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements WHERE NOT from_sql")
        prepared = [row[0] for row in cursor.fetchall()]
    assert any(sql.endswith(" FOR UPDATE") and "agents_agent" in sql for sql in prepared), prepared
