"""The keeper's view of tasks and contributions (SPEC §13): read-only, in the public words (open;
evaluated: resolved, contested or unresolved), and nothing sealed before the evaluation (§4.2)."""

import json
from datetime import timedelta

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import urlencode

from core.policy import TASK_MODES
from keeper.mixins import ReadOnlyAdminMixin, agent_link
from tasks.models import Contribution, Outcome, Task
from tasks.sealing import contributions_sealed, is_sealed, revealed_report

# The state filter's words are the other doors' list modes (core/policy.py).
STATE_MODES = {mode: statuses for mode, statuses in TASK_MODES.items() if statuses is not None}
OPEN_STATUSES = STATE_MODES["open"]


def task_state(task: Task) -> str:
    """The public state of a task, as every door names it."""
    if task.status in OPEN_STATUSES:
        return "open"
    state = f"evaluated: {task.outcome}"
    return f"{state} ({task.verdict.replace('_', ' ')})" if task.verdict else state


class StateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [
            *[(mode, mode) for mode in STATE_MODES],
            *[(outcome.value, f"evaluated: {outcome.value}") for outcome in Outcome],
        ]

    def queryset(self, request, queryset: QuerySet[Task]) -> QuerySet[Task]:
        value = self.value()
        if value in STATE_MODES:
            return queryset.filter(status__in=STATE_MODES[value])
        if value in Outcome.values:
            return queryset.filter(outcome=value)
        return queryset


class DeadlineFilter(admin.SimpleListFilter):
    """When tasks close. "Overdue, still open" should always be empty: the worker evaluates a task
    within a minute of its deadline; anything listed there means the worker is not running."""

    title = "deadline"
    parameter_name = "deadline"
    WINDOWS = {"1h": timedelta(hours=1), "24h": timedelta(days=1), "7d": timedelta(days=7)}

    def lookups(self, request, model_admin):
        return [
            ("overdue", "overdue, still open"),
            ("1h", "closes within 1 h"),
            ("24h", "closes within 24 h"),
            ("7d", "closes within 7 days"),
            ("passed", "passed"),
        ]

    def queryset(self, request, queryset: QuerySet[Task]) -> QuerySet[Task]:
        value, now = self.value(), timezone.now()
        if value == "overdue":
            return queryset.filter(status__in=OPEN_STATUSES, deadline__lte=now)
        if value in self.WINDOWS:
            return queryset.filter(deadline__gt=now, deadline__lte=now + self.WINDOWS[value])
        if value == "passed":
            return queryset.filter(deadline__lte=now)
        return queryset


@admin.register(Task)
class TaskAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["title", "state", "deadline", "contributions", "created_at"]
    list_filter = [StateFilter, DeadlineFilter]
    search_fields = ["id", "title"]
    date_hierarchy = "created_at"
    fields = readonly_fields = (
        "id",
        "title",
        "state",
        "question",
        "sources",
        "acceptance_criteria",
        "deadline_as_approved",
        "min_independent",
        "max_contributors",
        "budget",
        "public_input_digest",
        "poster",
        "created_at",
        "contributions",
        "evaluated_at",
        "evaluation",
    )

    @admin.display(description="deadline (as approved)")
    def deadline_as_approved(self, task: Task) -> str:
        return task.deadline_text

    @admin.display(description="state", ordering="status")
    def state(self, task: Task) -> str:
        return task_state(task)

    @admin.display(description="contributions", ordering="contributions_count")
    def contributions(self, task: Task) -> str:
        """Received / allowed, linking to the task's contributions (who sent them, never what)."""
        url = reverse("admin:tasks_contribution_changelist")
        query = urlencode({"task__id__exact": str(task.pk)})
        return format_html(
            '<a href="{}?{}">{} / {}</a>',
            url,
            query,
            task.contributions_count,
            task.max_contributors,
        )


class SealedFilter(admin.SimpleListFilter):
    title = "sealed"
    parameter_name = "sealed"

    def lookups(self, request, model_admin):
        return [("yes", "sealed (task open)"), ("no", "revealed (task evaluated)")]

    def queryset(self, request, queryset: QuerySet[Contribution]) -> QuerySet[Contribution]:
        if self.value() in ("yes", "no"):
            return contributions_sealed(queryset, sealed=self.value() == "yes")
        return queryset


@admin.register(Contribution)
class ContributionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Shows that a contribution exists and who sent it; its content only once the task is evaluated."""

    list_display = ["id", "task_title", "sender", "received_at", "sealed"]
    list_select_related = ["task", "agent"]
    list_filter = [SealedFilter]
    search_fields = ["id", "task__id", "agent__id"]
    date_hierarchy = "received_at"
    fields = readonly_fields = (
        "id",
        "task",
        "agent",
        "operation_id",
        "received_at",
        "report_digest",
        "revealed_report",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Contribution]:
        return super().get_queryset(request).defer("sealed_report")

    @admin.display(description="task", ordering="task__title")
    def task_title(self, contribution: Contribution) -> str:
        return format_html(
            '<a class="cell-text" href="{}">{}</a>',
            reverse("admin:tasks_task_change", args=[contribution.task_id]),
            contribution.task.title,
        )

    @admin.display(description="agent", ordering="agent")
    def sender(self, contribution: Contribution) -> str:
        return agent_link(contribution.agent)

    @admin.display(boolean=True, description="sealed")
    def sealed(self, contribution: Contribution) -> bool:
        return is_sealed(contribution)

    @admin.display(description="report")
    def revealed_report(self, contribution: Contribution) -> str:
        report = revealed_report(contribution)
        if report is None:
            return (
                f"Sealed until the task is evaluated (deadline {contribution.task.deadline_text})."
            )
        return format_html("<pre>{}</pre>", _pretty(report))


def _pretty(report: dict) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False)
