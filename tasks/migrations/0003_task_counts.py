from django.db import migrations, models
from django.db.models import Count


def count_existing_tasks(apps, schema_editor):
    """Start the counts from the tasks already there; from now on the writes keep them."""
    Task = apps.get_model("tasks", "Task")
    TaskCount = apps.get_model("tasks", "TaskCount")
    counted = Task.objects.order_by().values("status").annotate(n=Count("pk"))
    TaskCount.objects.bulk_create(
        TaskCount(status=row["status"], count=row["n"]) for row in counted
    )


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0002_evaluation_sweep"),
    ]

    operations = [
        migrations.CreateModel(
            name="TaskCount",
            fields=[
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("working", "Open"),
                            ("completed", "Completed"),
                            ("failed", "Failed"),
                        ],
                        max_length=10,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("count", models.BigIntegerField(default=0)),
            ],
        ),
        migrations.RunPython(count_existing_tasks, migrations.RunPython.noop),
    ]
