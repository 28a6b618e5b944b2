import uuid

from django.db import models
from django.db.models import F, Q

from agents.models import Agent
from core import policy


class CallKind(models.TextChoices):
    PAPER_TOPIC = "paper_topic", "Paper topic"
    SERVICE_DISCUSSION = "service_discussion", "Service discussion"
    FEEDBACK = "feedback", "Feedback"
    OTHER = "other", "Other"


class CallStatus(models.TextChoices):
    OPEN = policy.CALL_OPEN
    CLOSED = policy.CALL_CLOSED


class Stance(models.TextChoices):
    SUPPORT = "support"
    OPPOSE = "oppose"
    MIXED = "mixed"
    NEUTRAL = "neutral"


class Call(models.Model):
    """The keeper's open question: no deadline, answered publicly, closed only by the keeper."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    title = models.CharField(max_length=200)
    body = models.TextField(max_length=8000)
    kind = models.CharField(max_length=20, choices=CallKind.choices, default=CallKind.OTHER)
    status = models.CharField(max_length=6, choices=CallStatus.choices, default=CallStatus.OPEN)
    created_at = models.DateTimeField(editable=False)
    closed_at = models.DateTimeField(null=True, blank=True, editable=False)
    responses_count = models.PositiveIntegerField(default=0, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(
                "status", F("created_at").desc(), F("id").desc(), name="call_feed_by_status"
            )
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status=CallStatus.OPEN, closed_at__isnull=True)
                | Q(status=CallStatus.CLOSED, closed_at__isnull=False),
                name="call_closed_consistently",
            ),
        ]

    def __str__(self) -> str:
        return self.title


class CallResponse(models.Model):
    call = models.ForeignKey(Call, on_delete=models.PROTECT, related_name="responses")
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="call_responses")
    operation_id = models.CharField(max_length=200)
    stance = models.CharField(max_length=8, choices=Stance.choices, blank=True)
    body = models.TextField()
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["id"]
        indexes = [models.Index("agent", "created_at", name="call_response_by_agent")]
        constraints = [
            models.UniqueConstraint(fields=["call", "agent"], name="call_response_once_per_agent"),
        ]

    def __str__(self) -> str:
        return f"{self.stance or 'answer'} to {self.call_id}"
