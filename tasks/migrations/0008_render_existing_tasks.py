"""Render the stored public forms of every task written before they existed."""

from django.db import migrations

from tasks.rendered import RENDER_VERSION, RENDERED_FIELDS, task_render


def render_existing(apps, schema_editor):
    task_model = apps.get_model("tasks", "Task")
    for task in task_model.objects.exclude(rendered_version=RENDER_VERSION).iterator():
        task_render(task)
        task.save(update_fields=list(RENDERED_FIELDS))


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0007_task_rendered_forms"),
    ]

    operations = [
        migrations.RunPython(render_existing, migrations.RunPython.noop),
    ]
