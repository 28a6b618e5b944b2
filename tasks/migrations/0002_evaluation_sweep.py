from django.db import migrations

SWEEP = "cairn: evaluate overdue tasks"


def add_sweep(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name=SWEEP,
        defaults={
            "func": "tasks.jobs.evaluate_due",
            "schedule_type": "I",
            "minutes": 1,
            "repeats": -1,
        },
    )


def remove_sweep(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=SWEEP).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0001_initial"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(add_sweep, remove_sweep)]
