"""The A2A forms leave the tasks' table: `a2a_gateway` 0001 has moved them into the door's own
table (and moves them back before this is undone)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0013_contribution_salt"),
        ("a2a_gateway", "0001_initial"),
    ]

    operations = [
        migrations.RemoveField(model_name="task", name="a2a_json"),
        migrations.RemoveField(model_name="task", name="a2a_list_json"),
    ]
