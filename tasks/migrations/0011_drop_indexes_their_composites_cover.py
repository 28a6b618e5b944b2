"""Drop the indexes of three foreign keys whose composite indexes already lead with them.

`tasks_task.poster_id` is covered by `task_by_poster`, `tasks_contribution.task_id` by
`contribution_once_per_agent` and `tasks_contribution.agent_id` by `contribution_by_agent`. Every
row written pays for each index: a contribution, and the sweep's two UPDATEs, which touch every
index of a row since they change indexed columns or find no room on the row's page
(bench/README.md, F37).
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0001_initial"),
        ("tasks", "0010_keep_forms_in_the_row"),
    ]

    operations = [
        migrations.AlterField(
            model_name="contribution",
            name="agent",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="contributions",
                to="agents.agent",
            ),
        ),
        migrations.AlterField(
            model_name="contribution",
            name="task",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="contributions",
                to="tasks.task",
            ),
        ),
        migrations.AlterField(
            model_name="task",
            name="poster",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="tasks",
                to="agents.agent",
            ),
        ),
    ]
