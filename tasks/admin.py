"""The keeper's read-only view of tasks and contributions (SPEC §13), nothing sealed (§4.2)."""

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode

from core.policy import AGENT_LINK_REL, TASK_MODES
from keeper.mixins import ChoiceFilter, ReadOnlyAdminMixin, agent_link
from tasks.health import awaiting_keys, overdue
from tasks.models import Contribution, Outcome, Task, TaskStatus
from tasks.opening import grace_end
from tasks.sealing import evaluation_item, is_sealed

# The state filter's words are the other doors' list modes (core/policy.py).
STATE_MODES = {mode: statuses for mode, statuses in TASK_MODES.items() if statuses is not None}
OPEN_STATUSES = STATE_MODES["open"]


class StateFilter(ChoiceFilter):
    title = "state"
    parameter_name = "state"
    options = {
        **{mode: (mode, Q(status__in=statuses)) for mode, statuses in STATE_MODES.items()},
        **{outcome: (f"evaluated: {outcome}", Q(outcome=outcome)) for outcome in Outcome.values},
    }


def _closing_within(window: timedelta) -> Callable[[datetime], Q]:
    return lambda now: Q(deadline__gt=now, deadline__lte=now + window)


class DeadlineFilter(ChoiceFilter):
    """Its "overdue, still open" should always be empty: the worker evaluates a task within a
    minute of its deadline (or keypers' grace), so a task listed there means it is not running."""

    title = "deadline"
    parameter_name = "deadline"
    options = {
        "overdue": ("overdue, still open", overdue),
        "keys": (
            "passed, awaiting keys",
            lambda now: Q(awaiting_keys(now), status__in=OPEN_STATUSES, deadline__lte=now),
        ),
        "1h": ("closes within 1 h", _closing_within(timedelta(hours=1))),
        "24h": ("closes within 24 h", _closing_within(timedelta(days=1))),
        "7d": ("closes within 7 days", _closing_within(timedelta(days=7))),
        "passed": ("passed", lambda now: Q(deadline__lte=now)),
    }


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
        "public_page",
        "question",
        "source_links",
        "criteria",
        "deadline_as_approved",
        "min_independent",
        "max_contributors",
        "budget_words",
        "public_input_digest",
        "poster",
        "created_at",
        "contributions",
        "evaluated_at",
        "evaluation_table",
    )

    def view_on_site(self, task: Task) -> str:
        return reverse("web-task", args=[task.pk])

    @admin.display(description="public page")
    def public_page(self, task: Task) -> str:
        return format_html('<a href="{0}">{0}</a>', self.view_on_site(task))

    @admin.display(description="budget")
    def budget_words(self, task: Task) -> str:
        return f"{task.budget['currency']} {task.budget['amount']} (nothing is paid)"

    @admin.display(description="sources")
    def source_links(self, task: Task) -> str:
        return render_to_string(
            "admin/tasks/links.html", {"urls": task.sources, "agent_rel": AGENT_LINK_REL}
        )

    @admin.display(description="acceptance criteria")
    def criteria(self, task: Task) -> str:
        return format_html(
            '<ol class="cairn-list">{}</ol>',
            format_html_join("", "<li>{}</li>", ((item,) for item in task.acceptance_criteria)),
        )

    @admin.display(description="evaluation")
    def evaluation_table(self, task: Task) -> str:
        contributions = task.contributions.select_related("task", "agent").order_by("received_at")
        context: dict[str, Any] = {
            "task": task,
            "rows": [_contribution_row(c) for c in contributions],
            "agent_rel": AGENT_LINK_REL,
        }
        if task.evaluation is not None:
            context["evaluation"] = task.evaluation
            context["state"] = self.state(task)
            context["counts"] = ", ".join(
                f"{verdict.replace('_', ' ')} {count}"
                for verdict, count in task.evaluation["counts"].items()
            )
            context["voids"] = sum("void" in item for item in task.evaluation["contributions"])
        elif task.keys_pending and task.deadline <= timezone.now():
            context["grace_end"] = _utc(grace_end(task))
        return render_to_string("admin/tasks/evaluation.html", context)

    @admin.display(description="deadline (as approved)")
    def deadline_as_approved(self, task: Task) -> str:
        return task.deadline_text

    @admin.display(description="state", ordering="status")
    def state(self, task: Task) -> str:
        if task.status in OPEN_STATUSES:
            if task.keys_pending and task.deadline <= timezone.now():
                return "open: awaiting the keypers' releases"
            return "open"
        state = f"evaluated: {task.outcome}"
        return f"{state} ({task.verdict.replace('_', ' ')})" if task.verdict else state

    @admin.display(description="contributions", ordering="contributions_count")
    def contributions(self, task: Task) -> str:
        url = reverse("admin:tasks_contribution_changelist")
        query = urlencode({"task__id__exact": str(task.pk)})
        count = f"{task.contributions_count} / {task.max_contributors}"
        return format_html('<a href="{}?{}">{}</a>', url, query, count)


class SealedFilter(ChoiceFilter):
    title = "sealed"
    parameter_name = "sealed"
    SEALED = Q(task__status=TaskStatus.WORKING)  # as `is_sealed` says
    options = {"yes": ("sealed (task open)", SEALED), "no": ("revealed (task evaluated)", ~SEALED)}


@admin.register(Contribution)
class ContributionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["short_id", "task_title", agent_link, "received_at", "sealed", "keyper_sealed"]
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
        "sealing",
        "digest",
        "revealed_report",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Contribution]:
        return super().get_queryset(request).defer("sealed_report")

    @admin.display(description="id", ordering="id")
    def short_id(self, contribution: Contribution) -> str:
        """The whole id on hover: room for the task's title on a phone."""
        return format_html('<code title="{}">{}</code>', contribution.id, str(contribution.id)[:8])

    @admin.display(description="task", ordering="task__title")
    def task_title(self, contribution: Contribution) -> str:
        return format_html(
            '<a class="cell-text" href="{}">{}</a>',
            reverse("admin:tasks_task_change", args=[contribution.task_id]),
            contribution.task.title,
        )

    @admin.display(boolean=True, description="sealed")
    def sealed(self, contribution: Contribution) -> bool:
        return is_sealed(contribution)

    @admin.display(boolean=True, description="to keypers")
    def keyper_sealed(self, contribution: Contribution) -> bool:
        return contribution.keyper_seal is not None

    @admin.display(description="sealed by")
    def sealing(self, contribution: Contribution) -> str:
        seal = contribution.keyper_seal
        if seal is None:
            return "the server, which opens it at the evaluation"
        keypers = ", ".join(share["keyper"] for share in seal["shares"])
        return (
            f"its contributor, to the keypers ({seal['threshold']} of {len(seal['shares'])}: "
            f"{keypers}); {len(contribution.releases)} released so far"
        )

    @admin.display(description="report digest")
    def digest(self, contribution: Contribution) -> str:
        if is_sealed(contribution):
            return _sealed_text(contribution)
        return evaluation_item(contribution).get("report_digest") or "none: the report is void"

    @admin.display(description="report")
    def revealed_report(self, contribution: Contribution) -> str:
        if is_sealed(contribution):
            return _sealed_text(contribution)
        item = evaluation_item(contribution)
        if "void" in item:
            return render_to_string("admin/tasks/void.html", {"void": item["void"]})
        return render_to_string(
            "admin/tasks/report.html", {"report": item["report"], "agent_rel": AGENT_LINK_REL}
        )


def _sealed_text(contribution: Contribution) -> str:
    return f"Sealed until the task is evaluated (deadline {contribution.task.deadline_text})."


def _utc(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC"


def _contribution_row(contribution: Contribution) -> dict[str, Any]:
    row: dict[str, Any] = {
        "contribution": contribution,
        "short_id": str(contribution.id)[:8],
        "received": _utc(contribution.received_at),
        "sealed": is_sealed(contribution),
    }
    if row["sealed"]:
        row["sealed_text"] = _sealed_text(contribution)
    else:
        row["item"] = item = evaluation_item(contribution)
        if "report" in item:
            row["verdict"] = item["report"]["verdict"].replace("_", " ")
    return row
