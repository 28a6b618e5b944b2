"""Every task's A2A forms written again, by the SDK's serialisers (`a2a_gateway.stored_forms`), with two
new ones: the ListTasks form that includes artifacts, and A2A 0.3's tasks/get result.

The forms before this were built by filling a template of the SDK's output, which wrote a
number inside `metadata` as the view held it (`2`) where the SDK writes a double (`2.0`). Each
task's stored §3.2 view is its source, as it is for every later write: the rows are built by
the door's own `task_form`, which every change of a task goes through. On PostgreSQL the new
columns stay in the row and are compressed with lz4, as the others are (0001).
"""

import json

from django.db import migrations, models

from a2a_gateway.stored_forms import task_form
from core import statements
from tasks.changes import TaskChange
from tasks.models import Task

BATCH = 500
NEW_FORMS = ("list_item_full_json", "task_v0_3_json")
# What the hook reads of a task, and the columns of the door's table it writes here: the
# migration reads and writes no other, so a later field of either model does not break it.
READ = ("id", "status", "status_timestamp", "deadline", "view_json")
WRITTEN = (
    "status",
    "status_timestamp",
    "deadline",
    "task_json",
    "list_item_json",
    "list_item_full_json",
    "task_v0_3_json",
)


def forms_written(apps, schema_editor):
    rendered = Task.objects.exclude(view_json="").order_by("pk").values_list(*READ)
    for start in range(0, rendered.count(), BATCH):
        tasks = [
            Task(**dict(zip(READ, row, strict=True))) for row in rendered[start : start + BATCH]
        ]
        forms = [task_form(TaskChange(task, json.loads(task.view_json))) for task in tasks]
        statements.write_all(*statements.updated_many(forms, WRITTEN))


def column_in_row(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    quote = connection.ops.quote_name
    form = apps.get_model("a2a_gateway", "TaskForm")._meta
    names = [quote(form.get_field(name).column) for name in NEW_FORMS]
    alters = [f"ALTER COLUMN {name} SET STORAGE MAIN" for name in names]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_settings "
            "WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)"
        )
        if cursor.fetchone() is not None:
            alters += [f"ALTER COLUMN {name} SET COMPRESSION lz4" for name in names]
    schema_editor.execute(f"ALTER TABLE {quote(form.db_table)} {', '.join(alters)}")


class Migration(migrations.Migration):
    dependencies = [
        ("a2a_gateway", "0001_initial"),
        ("tasks", "0014_forms_moved_to_the_a2a_door"),
    ]

    operations = [
        migrations.AddField(
            model_name="taskform",
            name="list_item_full_json",
            field=models.TextField(default=""),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="taskform",
            name="task_v0_3_json",
            field=models.TextField(default=""),
            preserve_default=False,
        ),
        # Every row is current from here on; going back, each is current at 0001's version.
        migrations.AlterField(
            model_name="taskform", name="version", field=models.PositiveSmallIntegerField(default=1)
        ),
        migrations.RemoveField(model_name="taskform", name="version"),
        migrations.RunPython(column_in_row, migrations.RunPython.noop),
        migrations.RunPython(forms_written, migrations.RunPython.noop),
    ]
