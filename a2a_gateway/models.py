from django.db import models
from django.db.models import F

from tasks.models import Task


class TaskForm(models.Model):
    """The A2A door's copy of each task, written with its change (`stored_forms`) and read by
    every binding (`stored_reads`), with the columns GetTask and ListTasks filter and page by."""

    task = models.OneToOneField(Task, primary_key=True, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=10)
    # A2A's status.timestamp: creation while open, evaluation after. Pages are ordered by it.
    status_timestamp = models.DateTimeField()
    # Past it, an open task not awaiting its keypers is evaluated before it is shown (`tasks.due`).
    deadline = models.DateTimeField()
    keys_pending = models.BooleanField(default=False)
    # The GetTask result, and the task as a ListTasks page holds it without and with artifacts.
    task_json = models.TextField()
    list_item_json = models.TextField()
    list_item_full_json = models.TextField()
    # The GetTask result as A2A 0.3's tasks/get answers it (the SDK's 0.3 conversion).
    task_v0_3_json = models.TextField()

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
