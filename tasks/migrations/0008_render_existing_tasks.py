"""Once rendered the stored forms of every task written before they existed, with the code of its
day, which it imported; that code has since changed shape, and a migration must not run code
that can change under it, so it does nothing now.

Nothing depends on it: a row whose `rendered_version` is behind has its view built at read time
(`tasks.rendered.stored_view`), the A2A door's migrations write every task's forms, and
`tasks.rendered.tasks_render` renders a row again.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0007_task_rendered_forms"),
    ]

    operations = [
        migrations.RunPython(migrations.RunPython.noop, migrations.RunPython.noop),
    ]
