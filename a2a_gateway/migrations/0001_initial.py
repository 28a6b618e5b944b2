"""The A2A door's read model (`TaskForm`), and the forms the tasks' table held moved into it.

Every task gets a row: its stored forms when they were current (`rendered_version` 1, the
version of tasks/0013), else none (version 0), which the door answers through its handler until
the task is written again. Going back moves them into the tasks' table again. The statements are
written here from the historical models' names: a migration runs no code that can change under
it.

On PostgreSQL the forms stay in the row and are compressed with lz4, as the tasks' were
(tasks/0009 and tasks/0010 say why).
"""

import django.db.models.deletion
from django.db import migrations, models

# What a current form was at tasks/0013, and the version the moved forms have here.
RENDERED_AT_0013 = 1
MOVED_VERSION = 1
FORMS = ("task_json", "list_item_json")
# The largest target PostgreSQL takes: a row is left whole while it fits an 8 KB page.
TUPLE_TARGET = 8160


def _names(apps, schema_editor):
    quote = schema_editor.connection.ops.quote_name
    task = apps.get_model("tasks", "Task")._meta
    form = apps.get_model("a2a_gateway", "TaskForm")._meta

    def column(meta, name):
        return quote(meta.get_field(name).column)

    return quote(task.db_table), quote(form.db_table), task, form, column


def forms_moved_in(apps, schema_editor):
    tasks, forms, task, form, column = _names(apps, schema_editor)
    copied = ", ".join(
        column(form, name)
        for name in ("task", "status", "status_timestamp", "deadline", *FORMS, "version")
    )
    a2a_json, list_json = column(task, "a2a_json"), column(task, "a2a_list_json")
    current = f"{column(task, 'rendered_version')} = %s AND {a2a_json} <> ''"
    schema_editor.execute(
        f"INSERT INTO {forms} ({copied}) SELECT {column(task, 'id')}, {column(task, 'status')}, "
        f"{column(task, 'status_timestamp')}, {column(task, 'deadline')}, "
        f"CASE WHEN {current} THEN {a2a_json} ELSE '' END, "
        f"CASE WHEN {current} THEN {list_json} ELSE '' END, "
        f"CASE WHEN {current} THEN %s ELSE 0 END FROM {tasks}",
        [RENDERED_AT_0013, RENDERED_AT_0013, RENDERED_AT_0013, MOVED_VERSION],
    )


def forms_moved_out(apps, schema_editor):
    """Back into the tasks' table; a task without a moved form is left to be rendered again."""
    tasks, forms, task, form, column = _names(apps, schema_editor)
    key = f"{forms}.{column(form, 'task')} = {tasks}.{column(task, 'id')}"
    moved = f"{key} AND {forms}.{column(form, 'version')} = %s"

    def moved_form(name):
        return f"COALESCE((SELECT {forms}.{column(form, name)} FROM {forms} WHERE {moved}), '')"

    schema_editor.execute(
        f"UPDATE {tasks} SET {column(task, 'a2a_json')} = {moved_form('task_json')}, "
        f"{column(task, 'a2a_list_json')} = {moved_form('list_item_json')}, "
        f"{column(task, 'rendered_version')} = CASE WHEN EXISTS "
        f"(SELECT 1 FROM {forms} WHERE {moved}) THEN %s ELSE 0 END",
        [MOVED_VERSION, MOVED_VERSION, MOVED_VERSION, RENDERED_AT_0013],
    )


def forms_in_row(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    _, forms, _, form, column = _names(apps, schema_editor)
    alters = [f"SET (toast_tuple_target = {TUPLE_TARGET})"]
    alters += [f"ALTER COLUMN {column(form, name)} SET STORAGE MAIN" for name in FORMS]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_settings "
            "WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)"
        )
        if cursor.fetchone() is not None:
            alters += [f"ALTER COLUMN {column(form, name)} SET COMPRESSION lz4" for name in FORMS]
    schema_editor.execute(f"ALTER TABLE {forms} {', '.join(alters)}")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("tasks", "0013_contribution_salt"),
    ]

    operations = [
        migrations.CreateModel(
            name="TaskForm",
            fields=[
                (
                    "task",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="+",
                        serialize=False,
                        to="tasks.task",
                    ),
                ),
                ("status", models.CharField(max_length=10)),
                ("status_timestamp", models.DateTimeField()),
                ("deadline", models.DateTimeField()),
                ("task_json", models.TextField()),
                ("list_item_json", models.TextField()),
                ("version", models.PositiveSmallIntegerField()),
            ],
            options={
                "indexes": [
                    models.Index(
                        models.OrderBy(models.F("status_timestamp"), descending=True),
                        models.OrderBy(models.F("task"), descending=True),
                        name="a2a_form_feed",
                    ),
                    models.Index(
                        models.F("status"),
                        models.OrderBy(models.F("status_timestamp"), descending=True),
                        models.OrderBy(models.F("task"), descending=True),
                        name="a2a_form_feed_by_status",
                    ),
                ],
            },
        ),
        migrations.RunPython(forms_in_row, migrations.RunPython.noop),
        migrations.RunPython(forms_moved_in, forms_moved_out),
    ]
