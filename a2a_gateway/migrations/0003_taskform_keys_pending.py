"""The door's table gains `keys_pending`, so its reads ask the one due rule (`tasks.due.DUE`):
a task awaiting its keypers is past its deadline but not due, and a read does not evaluate it.
Each row takes its task's flag; every later change of a task writes it with the forms."""

from django.db import migrations, models


def flags_copied(apps, schema_editor):
    quote = schema_editor.connection.ops.quote_name
    task = apps.get_model("tasks", "Task")._meta
    form = apps.get_model("a2a_gateway", "TaskForm")._meta

    def column(meta, name):
        return quote(meta.get_field(name).column)

    schema_editor.execute(
        f"UPDATE {quote(form.db_table)} SET {column(form, 'keys_pending')} = %s "
        f"WHERE {column(form, 'task')} IN (SELECT {column(task, 'id')} "
        f"FROM {quote(task.db_table)} WHERE {column(task, 'keys_pending')})",
        [True],
    )


class Migration(migrations.Migration):
    dependencies = [
        ("a2a_gateway", "0002_forms_written_by_the_sdk"),
        ("tasks", "0016_task_due_skips_pending_keys"),
    ]

    operations = [
        migrations.AddField(
            model_name="taskform",
            name="keys_pending",
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(flags_copied, migrations.RunPython.noop),
    ]
