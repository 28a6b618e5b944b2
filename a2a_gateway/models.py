from django.db import models
from django.db.models import F

from tasks.models import Task


class TaskForm(models.Model):
    """The A2A door's read model: each task's public A2A form, binding-neutral (the proto JSON of
    the A2A Task, which each binding only wraps), with the columns GetTask and ListTasks filter
    and page by. Written in the transaction that changes its task, through `tasks.changes`
    (`a2a_gateway.read_model.task_forms_written`); read by `a2a_gateway.read_model`'s statements."""

    task = models.OneToOneField(Task, primary_key=True, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=10)
    # A2A's status.timestamp: creation while open, evaluation after. Pages are ordered by it.
    status_timestamp = models.DateTimeField()
    # An open task past it is evaluated before it is shown (SPEC §4.3): GetTask checks it here.
    deadline = models.DateTimeField()
    # The GetTask result, and the task as a ListTasks page without artifacts holds it.
    task_json = models.TextField()
    list_item_json = models.TextField()
    # `read_model.FORM_VERSION` when written; a row below it is not served until written again.
    version = models.PositiveSmallIntegerField()

    class Meta:
        indexes = [
            models.Index(F("status_timestamp").desc(), F("task").desc(), name="a2a_form_feed"),
            models.Index(
                "status",
                F("status_timestamp").desc(),
                F("task").desc(),
                name="a2a_form_feed_by_status",
            ),
        ]

    def __str__(self) -> str:
        return str(self.pk)
