import uuid

from django.db import models
from django.db.models import F, Q

from agents.models import Agent
from core import policy


class TaskStatus(models.TextChoices):
    """The A2A life of a task: working while open, then completed (resolved or contested) or failed."""

    WORKING = policy.TASK_WORKING, "Open"
    COMPLETED = policy.TASK_COMPLETED, "Completed"
    FAILED = policy.TASK_FAILED, "Failed"


class Outcome(models.TextChoices):
    RESOLVED = "resolved"
    CONTESTED = "contested"
    UNRESOLVED = "unresolved"


class Task(models.Model):
    """A public, permanent source-review task. The eight request fields are stored as approved."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Its own index would repeat `task_by_poster`'s leading column; every write pays for each index.
    poster = models.ForeignKey(
        Agent, on_delete=models.PROTECT, related_name="tasks", db_index=False
    )
    title = models.CharField(max_length=140)
    question = models.TextField()
    sources = models.JSONField()
    acceptance_criteria = models.JSONField()
    # The deadline exactly as written, so the approved digest can be recomputed from the view.
    deadline_text = models.CharField(max_length=24)
    deadline = models.DateTimeField()
    min_independent = models.PositiveSmallIntegerField()
    max_contributors = models.PositiveSmallIntegerField()
    budget = models.JSONField()
    public_input_digest = models.CharField(max_length=71)
    created_at = models.DateTimeField()
    status = models.CharField(max_length=10, choices=TaskStatus.choices, default=TaskStatus.WORKING)
    # A2A's status.timestamp: creation while open, evaluation after. Lists are ordered by it.
    status_timestamp = models.DateTimeField()
    contributions_count = models.PositiveSmallIntegerField(default=0)
    outcome = models.CharField(max_length=10, choices=Outcome.choices, blank=True)
    verdict = models.CharField(max_length=24, blank=True)
    evaluated_at = models.DateTimeField(null=True, blank=True)
    evaluation = models.JSONField(null=True, blank=True)
    # Set by the first keyper-sealed contribution (SPEC §15.8): then only the worker evaluates it.
    keys_pending = models.BooleanField(default=False)
    # The §3.2 view `tasks.rendered.task_render` stored; `rendered_version` says when to redo it.
    view_json = models.TextField(blank=True, editable=False)
    rendered_version = models.PositiveSmallIntegerField(default=0, editable=False)

    class Meta:
        ordering = ["-status_timestamp", "-id"]
        indexes = [
            models.Index(F("status_timestamp").desc(), F("id").desc(), name="task_feed"),
            models.Index(
                "status", F("status_timestamp").desc(), F("id").desc(), name="task_feed_by_status"
            ),
            # Keys last: the feed's open tasks and the due probes read it in deadline order,
            # and the probes skip the tasks whose keys are pending in the index itself.
            models.Index("status", "deadline", "keys_pending", name="task_due"),
            models.Index("poster", "created_at", name="task_by_poster"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(contributions_count__lte=F("max_contributors")),
                name="task_not_overfull",
            ),
            models.CheckConstraint(
                condition=Q(max_contributors__gte=F("min_independent")), name="task_room_for_quorum"
            ),
            models.CheckConstraint(
                condition=Q(status=TaskStatus.WORKING, evaluated_at__isnull=True, outcome="")
                | (~Q(status=TaskStatus.WORKING) & Q(evaluated_at__isnull=False) & ~Q(outcome="")),
                name="task_evaluated_consistently",
            ),
        ]

    def __str__(self) -> str:
        return self.title


class TaskCount(models.Model):
    """Tasks per status, kept exact, so a list's `totalSize` is one row read, not a count."""

    status = models.CharField(primary_key=True, max_length=10, choices=TaskStatus.choices)
    count = models.BigIntegerField(default=0)


class Contribution(models.Model):
    """A sealed report. Its content is public only inside the task's evaluation."""

    # The sequence orders contributions as received; the public id is the UUID.
    seq = models.BigAutoField(primary_key=True)
    id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # No own index, as `poster`: task leads the unique constraint, agent `contribution_by_agent`.
    task = models.ForeignKey(
        Task, on_delete=models.PROTECT, related_name="contributions", db_index=False
    )
    agent = models.ForeignKey(
        Agent, on_delete=models.PROTECT, related_name="contributions", db_index=False
    )
    operation_id = models.CharField(max_length=200)
    # AES-256-GCM (SPEC §15.6); null if evaluated before migration 0012 dropped such seals.
    sealed_report = models.BinaryField(null=True, blank=True)
    # Empty for a keyper-sealed contribution: only its evaluation item holds its digest.
    report_digest = models.CharField(max_length=71, blank=True)
    # 32 random bytes, base64url: the log holds only the commitment to (digest, salt) until the
    # evaluation publishes the salt (SPEC §15.2). Empty on a contribution made before salts.
    salt = models.CharField(max_length=43, blank=True, default="")
    received_at = models.DateTimeField()
    # A keyper-sealed contribution's envelope (SPEC §15.8; `tasks.services`); null for the plain
    # form. The server never holds its plaintext before the keypers release the key.
    keyper_seal = models.JSONField(null=True, blank=True)
    releases = models.JSONField(default=list, blank=True)
    # The receipt's compact JWS (SPEC §15.2), kept so every later answer repeats the same bytes.
    receipt_signature = models.TextField(blank=True)

    class Meta:
        ordering = ["seq"]
        indexes = [models.Index("agent", "received_at", name="contribution_by_agent")]
        constraints = [
            models.UniqueConstraint(fields=["task", "agent"], name="contribution_once_per_agent"),
        ]

    def __str__(self) -> str:
        return str(self.id)


class Sweep(models.Model):
    """The sweep's last run, one row: the readiness check (SPEC §16) asks whether a worker is
    sweeping, which keeps "within a minute of the deadline" when nobody reads."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    finished_at = models.DateTimeField(null=True)
    evaluated = models.PositiveIntegerField(default=0)
