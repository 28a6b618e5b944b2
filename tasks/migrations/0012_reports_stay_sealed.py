"""Drop `Contribution.report`, the public copy the evaluation used to write beside the task's.

The evaluation puts every report of its task into the task's evaluation, which is public; it also
wrote each report back onto its contribution's row and dropped the seal, rewriting every row of
the task's contributions for a copy nobody needs. Reports now stay sealed, and a reader of an
evaluated task is given the evaluation's copy.

Before the column goes, each copy it holds is checked against the evaluation's, so no report can
be lost: a difference stops the migration and names the contribution. Going back fills the column
again from the evaluations.
"""

from django.db import migrations

BATCH = 500


def _evaluated_reports(tasks):
    """{contribution id: report} as these tasks' evaluations hold them."""
    return {
        item["contribution_id"]: item["report"]
        for task in tasks
        for item in (task.evaluation or {}).get("contributions", ())
    }


def _in_batches(apps):
    Task = apps.get_model("tasks", "Task")
    evaluated = Task.objects.filter(evaluation__isnull=False).only("id", "evaluation")
    batch = []
    for task in evaluated.order_by("pk").iterator(chunk_size=BATCH):
        batch.append(task)
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def check_public_copies(apps, schema_editor):
    Contribution = apps.get_model("tasks", "Contribution")
    for tasks in _in_batches(apps):
        published = _evaluated_reports(tasks)
        copies = Contribution.objects.filter(task__in=tasks, report__isnull=False)
        for contribution_id, report in copies.values_list("id", "report"):
            if published.get(str(contribution_id)) != report:
                raise RuntimeError(
                    f"contribution {contribution_id}: its report differs from its task's "
                    "evaluation; not dropping the only copy of it"
                )
    orphans = Contribution.objects.filter(report__isnull=False, task__evaluation__isnull=True)
    if orphans.exists():
        raise RuntimeError(
            f"contribution {orphans.values_list('id', flat=True).first()} holds a public report "
            "but its task has no evaluation; not dropping the only copy of it"
        )


def fill_public_copies(apps, schema_editor):
    Contribution = apps.get_model("tasks", "Contribution")
    for tasks in _in_batches(apps):
        published = _evaluated_reports(tasks)
        revealed = list(Contribution.objects.filter(task__in=tasks).only("id", "report"))
        for contribution in revealed:
            contribution.report = published[str(contribution.id)]
        Contribution.objects.bulk_update(revealed, ["report"], batch_size=BATCH)


class Migration(migrations.Migration):
    dependencies = [("tasks", "0011_drop_indexes_their_composites_cover")]

    operations = [
        migrations.RunPython(check_public_copies, fill_public_copies),
        migrations.RemoveField(model_name="contribution", name="report"),
    ]
