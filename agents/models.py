import uuid

from django.db import models


class Agent(models.Model):
    """A holder of a write token. Only the token's SHA-256 is kept; a revoked token is no token."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    token_sha256 = models.CharField(max_length=64, unique=True, editable=False)
    label = models.CharField(max_length=80, blank=True)
    # Keyed hash of the registering address: enough to rate-limit, useless to identify.
    address_hash = models.CharField(max_length=64, db_index=True, editable=False)
    created_at = models.DateTimeField(db_index=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.label or 'agent'} ({self.id})"


class Door(models.TextChoices):
    A2A = "a2a", "A2A"
    HTTP = "http", "HTTP"
    ADMIN = "admin", "Admin"


class Operation(models.Model):
    """An accepted write, keyed by the agent's operation id, so a retry replays instead of repeating."""

    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="operations")
    operation_id = models.CharField(max_length=200)
    kind = models.CharField(max_length=40)
    request_digest = models.CharField(max_length=71)
    result = models.JSONField()
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "operation_id"], name="operation_once_per_agent"
            ),
        ]


class AuditEntry(models.Model):
    at = models.DateTimeField(db_index=True)
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    door = models.CharField(max_length=8, choices=Door.choices)
    client = models.CharField(max_length=100, blank=True)
    operation = models.CharField(max_length=40)
    object_type = models.CharField(max_length=40)
    object_id = models.CharField(max_length=64)

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.door} {self.operation} {self.object_type} {self.object_id}"
