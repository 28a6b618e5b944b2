"""Drop the indexes of three foreign keys whose composite indexes already lead with them.

`tasks_task.poster_id` is covered by `task_by_poster`, `tasks_contribution.task_id` by
`contribution_once_per_agent` and `tasks_contribution.agent_id` by `contribution_by_agent`. Every
row written pays for each index: a contribution, and the sweep's two UPDATEs, which touch every
index of a row since they change indexed columns or find no room on the row's page.

Only the indexes go. Django's `AlterField` would also drop each foreign-key constraint and add it
again, which on PostgreSQL checks every row of the table under a lock that holds writes back.
"""

import django.db.models.deletion
from django.db import migrations, models

# (model, field) of each foreign key whose own index is dropped.
FOREIGN_KEYS = (("task", "poster"), ("contribution", "task"), ("contribution", "agent"))


def _index_sql(apps, schema_editor, *, create: bool) -> None:
    for model_name, field_name in FOREIGN_KEYS:
        model = apps.get_model("tasks", model_name)
        field = model._meta.get_field(field_name)
        if create:
            schema_editor.execute(schema_editor._create_index_sql(model, fields=[field]))
        else:
            name = schema_editor._create_index_name(model._meta.db_table, [field.column])
            schema_editor.execute(schema_editor._delete_index_sql(model, name))


def drop_indexes(apps, schema_editor):
    _index_sql(apps, schema_editor, create=False)


def create_indexes(apps, schema_editor):
    _index_sql(apps, schema_editor, create=True)


def _without_index(to: str, related_name: str) -> models.ForeignKey:
    return models.ForeignKey(
        db_index=False,
        on_delete=django.db.models.deletion.PROTECT,
        related_name=related_name,
        to=to,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0001_initial"),
        ("tasks", "0010_keep_forms_in_the_row"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(drop_indexes, create_indexes)],
            state_operations=[
                migrations.AlterField(
                    model_name="contribution",
                    name="agent",
                    field=_without_index("agents.agent", "contributions"),
                ),
                migrations.AlterField(
                    model_name="contribution",
                    name="task",
                    field=_without_index("tasks.task", "contributions"),
                ),
                migrations.AlterField(
                    model_name="task",
                    name="poster",
                    field=_without_index("agents.agent", "tasks"),
                ),
            ],
        ),
    ]
