"""`task_due` gains `keys_pending` as its last column (SPEC §15.8).

A task whose keys are pending is not due to a read: the due probes (`tasks.due.DUE`, the
sweep's batch) skip it in the index itself, without a visit to its row. The column comes last so
that the index still gives the open tasks in deadline order (the feed's open section).
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0015_keyper_sealed_contributions"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="task", name="task_due"),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                models.F("status"),
                models.F("deadline"),
                models.F("keys_pending"),
                name="task_due",
            ),
        ),
    ]
