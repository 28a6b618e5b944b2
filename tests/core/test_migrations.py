"""Migrations that move data: what an operator's existing rows become, both ways."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tasks.evaluation import task_evaluate
from tasks.models import Contribution
from tasks.sealing import contribution_report
from tests.factories import contribution_payload
from tests.factories import contribution_report as report_with

BEFORE = ("tasks", "0011_drop_indexes_their_composites_cover")
AFTER = ("tasks", "0012_reports_stay_sealed")


def migrate(target: tuple[str, str]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([target])


def migrate_latest() -> None:
    """Every app at its newest migration, where the live models are."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


def public_copies() -> list:
    with connection.cursor() as cursor:
        cursor.execute("SELECT report FROM tasks_contribution ORDER BY seq")
        return [json.loads(r) if isinstance(r, str) else r for (r,) in cursor.fetchall()]


@pytest.fixture
def evaluated_reports(transactional_db, poster, post_task, make_agent, contribute, time_machine):
    task = post_task(poster)
    reports = [report_with(summary=f"Report {n}: the header is sent.") for n in range(2)]
    for report in reports:
        contribute(make_agent(), task, contribution_payload(report))
    time_machine.move_to(task.deadline, tick=True)
    task_evaluate(task_id=task.pk)
    yield reports
    migrate_latest()


def test_going_back_fills_the_public_copies_and_coming_back_drops_them(evaluated_reports):
    migrate(BEFORE)
    assert public_copies() == evaluated_reports

    migrate(AFTER)
    migrate_latest()
    contributions = Contribution.objects.select_related("task").order_by("seq")
    assert [contribution_report(c) for c in contributions] == evaluated_reports


def test_a_public_copy_that_differs_from_the_evaluation_stops_the_migration(evaluated_reports):
    migrate(BEFORE)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE tasks_contribution SET report = %s WHERE seq = (SELECT MIN(seq) FROM "
            "tasks_contribution)",
            [json.dumps({"verdict": "source_unclear"})],
        )

    with pytest.raises(RuntimeError, match="not dropping the only copy"):
        migrate(AFTER)
    assert public_copies()[0] == {"verdict": "source_unclear"}, "the column is still there"

    with connection.cursor() as cursor:
        cursor.execute("UPDATE tasks_contribution SET report = NULL")
