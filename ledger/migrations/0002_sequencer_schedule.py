from django.db import migrations

SEQUENCER = "cairn: sequence the transparency log"


def add_schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name=SEQUENCER,
        defaults={
            "func": "ledger.jobs.sequence_log",
            "schedule_type": "I",
            "minutes": 1,
            "repeats": -1,
        },
    )


def remove_schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=SEQUENCER).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("ledger", "0001_initial"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(add_schedule, remove_schedule)]
