"""The public forms stored beside each task (Zulip's rendered_content pattern): written in the
transaction that changes the task, never holding sealed content, rendered for old rows by a
migration."""

from __future__ import annotations

import importlib
import json

from django.apps import apps
from django.db import connection
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.models import Task
from tasks.rendered import RENDER_VERSION, RENDERED_FIELDS, json_text, task_render
from tasks.selectors import task_get, task_view
from tests.conftest import postgres_only
from tests.factories import contribution_payload, contribution_report

SECRET_SUMMARY = "The sealed finding: the header is set in buildHeaders() at line 212 of the file."


def stored_forms(task: Task) -> list[str]:
    task.refresh_from_db()
    return [task.view_json, task.a2a_json, task.a2a_list_json]


def test_every_change_stores_the_view_every_door_shows(poster, post_task, contribute, make_agent):
    task = post_task(poster)
    assert json.loads(stored_forms(task)[0]) == task_view(task)

    contribute(make_agent(), task)

    view = json.loads(stored_forms(task)[0])
    a2a = json.loads(task.a2a_json)
    assert view["contributions_received"] == 1 == a2a["metadata"]["cairn"]["contributions_received"]
    assert a2a["status"]["state"] == "TASK_STATE_WORKING"


def test_a_contribution_stores_the_very_forms_a_render_writes(
    poster, post_task, contribute, make_agent
):
    task = post_task(poster)
    for _ in range(task.max_contributors):
        contribute(make_agent(), task)
        stored = stored_forms(task)
        task_render(task)
        assert stored == [task.view_json, task.a2a_json, task.a2a_list_json]


def test_a_contribution_renders_afresh_a_task_whose_forms_are_not_current(
    poster, post_task, contribute, make_agent
):
    task = post_task(poster)
    Task.objects.filter(pk=task.pk).update(
        view_json="", a2a_json="", a2a_list_json="", rendered_version=0
    )

    contribute(make_agent(), task)

    task.refresh_from_db()
    assert task.rendered_version == RENDER_VERSION
    assert json.loads(task.view_json) == task_view(task)
    assert json.loads(task.a2a_json)["metadata"]["cairn"]["contributions_received"] == 1


def test_sealed_content_reaches_the_stored_forms_only_through_the_evaluation(
    poster, post_task, contribute, make_agent, time_machine
):
    task = post_task(poster)
    report = contribution_report(verdict="source_contradicted", summary=SECRET_SUMMARY)
    contribute(make_agent(), task, contribution_payload(report))

    assert not any(SECRET_SUMMARY in form for form in stored_forms(task))
    assert not any("source_contradicted" in form for form in stored_forms(task))

    time_machine.move_to(task.deadline, tick=True)
    task_get(task.pk)  # a read of an overdue task evaluates it

    view_json, a2a_json, a2a_list_json = stored_forms(task)
    assert json.loads(view_json)["evaluation"]["contributions"][0]["report"] == report
    artifact = json.loads(a2a_json)["artifacts"][0]
    assert artifact["artifactId"] == "evaluation"
    assert artifact["parts"][0]["data"]["contributions"][0]["report"]["summary"] == SECRET_SUMMARY
    # A ListTasks page without artifacts shows the outcome, not the reports.
    assert SECRET_SUMMARY not in a2a_list_json
    assert json.loads(a2a_list_json)["status"]["state"] == "TASK_STATE_FAILED"


def test_the_migration_renders_tasks_written_before_the_forms_existed(poster, post_task):
    task = post_task(poster)
    Task.objects.filter(pk=task.pk).update(
        view_json="", a2a_json="", a2a_list_json="", rendered_version=0
    )

    migration = importlib.import_module("tasks.migrations.0008_render_existing_tasks")
    migration.render_existing(apps, None)

    task.refresh_from_db()
    assert task.rendered_version == RENDER_VERSION
    assert all(getattr(task, field) for field in RENDERED_FIELDS)
    assert json.loads(task.view_json) == task_view(task)


def _toasted_values() -> list[int]:
    """The size of each value PostgreSQL moved out of a task's row into the tasks' TOAST table."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT reltoastrelid::regclass FROM pg_class WHERE oid = %s::regclass",
            [Task._meta.db_table],
        )
        (toast,) = cursor.fetchone()
        cursor.execute(f"SELECT sum(octet_length(chunk_data)) FROM {toast} GROUP BY chunk_id")
        return [size for (size,) in cursor.fetchall()]


def _stored_sizes(task: Task) -> dict[str, int]:
    columns = ("evaluation", *RENDERED_FIELDS)
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

    task = task_get(task.pk)

    assert task.evaluated_at is not None
    assert len(task.view_json) + len(task.a2a_json) + len(task.a2a_list_json) > 4000
    stored = _stored_sizes(task)
    forms = {stored[name] for name in RENDERED_FIELDS}
    # A row over a page has its evaluation (JSON no door serves as it is) moved out first, the
    # forms every read serves last (migration 0010): none of them may have left the row.
    assert not forms & set(_toasted_values())
    assert set(_toasted_values()) <= {stored["evaluation"]}


def test_the_stored_text_is_what_json_dumps_writes_even_where_orjson_differs():
    """The stored forms must be the SDK dispatcher's bytes, which it writes with `json.dumps`.
    orjson writes small floats otherwise (`1e-5`, `0.00001`), refuses ints beyond 64 bits and
    lone surrogates, and must not be what decides any of them."""
    values = [
        {"small": [1e-05, -3.5e-05, 6.26703014325946e-05, 1.5e-07, 5e-324]},
        {"large": [1e16, 1.2345678901234568e17, 2.0, -0.0, 0.1]},
        {"count": 2**70, "text": "1e-5 and 0.0000 in a string"},
        {"text": "é😀\u2028</script>\x00\x1f", "surrogate": "\ud800"},
    ]
    for value in values:
        assert json_text(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))


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
def test_any_json_value_is_written_as_json_dumps_writes_it(value):
    """Floats of every size, bare and nested, next to strings made of the very characters the
    small-float check looks for."""
    assert json_text(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
