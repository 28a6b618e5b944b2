"""The public forms stored for each task (Zulip's rendered_content pattern): the §3.2 view in the
task's row, the A2A door's forms in the door's own table through the one hook `tasks.changes`,
each written in the transaction that changes the task and never holding sealed content."""

from __future__ import annotations

import json

import pytest
from django.db import connection, transaction
from django.test import override_settings
from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_gateway.models import TaskForm
from a2a_gateway.stored_forms import task_form
from a2a_gateway.translate import task_public
from tasks.changes import TaskChange
from tasks.evaluation import task_evaluated_if_due
from tasks.models import Task
from tasks.rendered import RENDER_VERSION, json_text, task_render, task_view, tasks_render
from tasks.selectors import task_get
from tests.conftest import postgres_only
from tests.factories import contribution_payload, contribution_report

SECRET_SUMMARY = "The sealed finding: the header is set in buildHeaders() at line 212 of the file."


def stored_forms(task: Task) -> list[str]:
    task.refresh_from_db()
    form = TaskForm.objects.get(task=task)
    return [
        task.view_json,
        form.task_json,
        form.list_item_json,
        form.list_item_full_json,
        form.task_v0_3_json,
    ]


def parsed(forms: list[str]) -> list[object]:
    return [json.loads(form) for form in forms]


def test_every_change_stores_the_view_every_door_shows(poster, post_task, contribute, make_agent):
    task = post_task(poster)
    assert json.loads(stored_forms(task)[0]) == task_view(task)

    contribute(make_agent(), task)

    view, a2a, *_ = parsed(stored_forms(task))
    assert view["contributions_received"] == 1 == a2a["metadata"]["cairn"]["contributions_received"]
    assert a2a["status"]["state"] == "TASK_STATE_WORKING"


def test_a_contribution_stores_the_forms_a_render_writes(poster, post_task, contribute, make_agent):
    task = post_task(poster)
    for _ in range(task.max_contributors):
        contribute(make_agent(), task)
        stored = stored_forms(task)
        view = task_render(task)
        form = task_form(TaskChange(task, view))
        assert stored == [
            task.view_json,
            form.task_json,
            form.list_item_json,
            form.list_item_full_json,
            form.task_v0_3_json,
        ]


def test_the_a2a_forms_are_written_through_the_configured_hook_only(poster, post_task):
    with override_settings(CAIRN_TASK_CHANGED=""):
        unseen = post_task(poster)
    assert not TaskForm.objects.filter(task=unseen).exists()

    tasks_render(Task.objects.filter(pk=unseen.pk))
    form = TaskForm.objects.get(task=unseen)
    assert json.loads(form.task_json)["metadata"]["cairn"] == task_public(task_view(unseen))


def test_a_form_rolls_back_with_the_change_it_follows(poster, post_task, contribute, make_agent):
    task = post_task(poster)
    with pytest.raises(RuntimeError), transaction.atomic():
        contribute(make_agent(), task)
        raise RuntimeError("the transaction fails after the contribution")

    view, a2a, listed, *_ = parsed(stored_forms(task))
    assert task.contributions_count == 0 == view["contributions_received"]
    assert a2a["metadata"]["cairn"]["contributions_received"] == 0
    assert listed["metadata"]["cairn"]["contributions_received"] == 0


def test_sealed_content_reaches_the_stored_forms_only_through_the_evaluation(
    poster, post_task, contribute, make_agent, time_machine
):
    task = post_task(poster)
    report = contribution_report(verdict="source_contradicted", summary=SECRET_SUMMARY)
    contribute(make_agent(), task, contribution_payload(report))

    assert not any(SECRET_SUMMARY in form for form in stored_forms(task))
    assert not any("source_contradicted" in form for form in stored_forms(task))

    time_machine.move_to(task.deadline, tick=True)
    task_evaluated_if_due(task_get(task.pk))  # what a door does before it shows a task

    view_json, a2a_json, a2a_list_json, a2a_full_json, _ = stored_forms(task)
    assert json.loads(view_json)["evaluation"]["contributions"][0]["report"] == report
    artifact = json.loads(a2a_json)["artifacts"][0]
    assert artifact["artifactId"] == "evaluation"
    assert artifact["parts"][0]["data"]["contributions"][0]["report"]["summary"] == SECRET_SUMMARY
    # A ListTasks page without artifacts shows the outcome, not the reports.
    assert SECRET_SUMMARY not in a2a_list_json
    [listed_artifact] = json.loads(a2a_full_json)["artifacts"]
    assert listed_artifact["parts"][0]["data"] == artifact["parts"][0]["data"]
    assert json.loads(a2a_list_json)["status"]["state"] == "TASK_STATE_FAILED"
    assert TaskForm.objects.get(task=task).status == Task.objects.get(pk=task.pk).status


def test_a_task_rendered_before_the_current_version_is_rendered_again(poster, post_task):
    task = post_task(poster)
    Task.objects.filter(pk=task.pk).update(view_json="", rendered_version=0)
    TaskForm.objects.filter(task=task).update(
        task_json="", list_item_json="", list_item_full_json="", task_v0_3_json=""
    )

    tasks_render(Task.objects.filter(pk=task.pk))

    task.refresh_from_db()
    assert task.rendered_version == RENDER_VERSION
    assert json.loads(task.view_json) == task_view(task)
    form = TaskForm.objects.get(task=task)
    assert json.loads(form.task_json)["metadata"]["cairn"] == task_public(task_view(task))
    assert form.list_item_json and form.list_item_full_json and form.task_v0_3_json


def _toasted_values(model) -> list[int]:
    """The size of each value PostgreSQL moved out of a model's rows into its TOAST table."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT reltoastrelid::regclass FROM pg_class WHERE oid = %s::regclass",
            [model._meta.db_table],
        )
        (toast,) = cursor.fetchone()
        cursor.execute(f"SELECT sum(octet_length(chunk_data)) FROM {toast} GROUP BY chunk_id")
        return [size for (size,) in cursor.fetchall()]


def _stored_sizes(task: Task) -> dict[str, int]:
    columns = ("evaluation", "view_json")
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {', '.join(f'pg_column_size({name})' for name in columns)} "
            f"FROM {Task._meta.db_table} WHERE id = %s",
            [task.pk],
        )
        return dict(zip(columns, cursor.fetchone(), strict=True))


@postgres_only("TOAST is PostgreSQL's")
def test_an_evaluated_tasks_forms_stay_in_its_row(
    poster, post_task, contribute, make_agent, time_machine
):
    task = post_task(poster)
    for _ in range(2):
        contribute(make_agent(), task, contribution_payload(contribution_report()))
    time_machine.move_to(task.deadline, tick=True)

    task = task_evaluated_if_due(task_get(task.pk))

    assert task.evaluated_at is not None
    form = TaskForm.objects.get(task=task)
    assert len(form.task_json) + len(form.list_item_json) > 2500  # past TOAST's 2 KB threshold
    assert _toasted_values(TaskForm) == [], "the A2A forms stay in their row"
    stored = _stored_sizes(task)
    # A row over a page has its evaluation (JSON no door serves as it is) moved out first, the
    # view every HTTP and MCP read serves last (migration 0010): it may not have left the row.
    assert stored["view_json"] not in set(_toasted_values(Task))
    assert set(_toasted_values(Task)) <= {stored["evaluation"]}


JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.text(alphabet='0123456789.e-:,[ ab"', max_size=12),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.floats(min_value=-1e-3, max_value=1e-3),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(alphabet="e-0.1:", max_size=5), inner, max_size=4),
    ),
    max_leaves=20,
)


@settings(max_examples=2000, deadline=None)
@given(JSON_VALUES)
def test_any_json_value_is_written_as_json_that_reads_back_the_same(value):
    """Cairn's own JSON: orjson, and `json.dumps` for what orjson refuses (an int beyond 64
    bits); how either writes a number is theirs, what it reads back is what was written."""
    assert json.loads(json_text(value)) == value
