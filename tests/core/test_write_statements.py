"""How many SQL statements a contribution costs: the hot write of the benchmark (bench/README.md,
F7). The rules stay in the service; this holds the count they need. And the hand-written
statements cannot leave a model's field out."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core import statements
from core.clock import now_ms
from ledger.models import QueuedEntry
from tasks.models import Contribution
from tests.conftest import postgres_only


def test_a_contribution_costs_five_statements_ten_on_sqlite(
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
    # PostgreSQL takes the contribution, the log entry, the task's count, the A2A door's form,
    # the operation record and its audit entry as one statement.
    expected = 5 if connection.vendor == "postgresql" else 10
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


def test_an_insert_that_leaves_a_field_out_is_refused():
    """A field added to a model and forgotten in a hand-written INSERT would be written as nothing
    (the database default, or an error much later): the statement is refused when built."""
    contribution = Contribution(
        task_id=uuid.uuid4(),
        agent_id=uuid.uuid4(),
        operation_id="op-1",
        report_digest="sha256:" + "0" * 64,
        salt="s" * 43,
        received_at=now_ms(),
        receipt_signature="",
    )
    values = statements.object_values(contribution)
    assert "seq" not in values, "the auto-numbered key is the database's"
    statements.inserted(Contribution, values)

    without_salt = {name: value for name, value in values.items() if name != "salt"}
    with pytest.raises(statements.FieldLeftOut, match="salt"):
        statements.inserted(Contribution, without_salt)
    with pytest.raises(statements.FieldLeftOut, match="entry"):
        statements.rows_inserted(QueuedEntry, ["queued_at"], [(now_ms(),)])
