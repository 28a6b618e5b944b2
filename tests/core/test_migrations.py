"""Migrations that move data: what an operator's existing rows become, both ways."""

from __future__ import annotations

import json
import uuid

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from a2a_gateway.models import TaskForm
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


def forms_in_the_door() -> dict[str, tuple[object, object]]:
    return {
        str(form.task_id): (json.loads(form.task_json), json.loads(form.list_item_json))
        for form in TaskForm.objects.all()
    }


def forms_in_the_tasks_table() -> dict[str, tuple[str, str, int]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, a2a_json, a2a_list_json, rendered_version FROM tasks_task")
        return {
            str(uuid.UUID(str(key))): (a2a, listed, version)
            for key, a2a, listed, version in cursor.fetchall()
        }


def test_the_a2a_forms_move_into_the_doors_table_and_back(
    transactional_db, poster, post_task, make_agent, contribute
):
    task = post_task(poster)
    contribute(make_agent(), task)
    moved = forms_in_the_door()
    try:
        migrate(("a2a_gateway", None))
        a2a, listed, version = forms_in_the_tasks_table()[str(task.pk)]
        assert (json.loads(a2a), json.loads(listed)) == moved[str(task.pk)]
        assert version == 1, "the forms go back current"

        migrate_latest()
        assert forms_in_the_door() == moved
        form = TaskForm.objects.get(task=task)
        assert '"contributions_received":1.0' in form.task_json, "written again by the SDK"
        assert json.loads(form.list_item_full_json)["id"] == str(task.pk)
    finally:
        migrate_latest()
