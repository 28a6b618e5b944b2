"""The keeper's view of tasks and contributions (SPEC §13): read-only, in the public words (open;
evaluated: resolved, contested or unresolved), and nothing sealed before the evaluation (§4.2).
A task reads as its public page does: sources as links, criteria as a list, the evaluation as a
table of its contributions with each report readable."""

from datetime import datetime, timedelta
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from core.policy import AGENT_LINK_REL, TASK_MODES
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
        url = reverse("web-task", args=[task.pk])
        return format_html('<a href="{}">{}</a>', url, url)

    @admin.display(description="budget")
    def budget_words(self, task: Task) -> str:
        return f"{task.budget['currency']} {task.budget['amount']} (nothing is paid)"

    @admin.display(description="sources")
    def source_links(self, task: Task) -> str:
        return _links(task.sources)

    @admin.display(description="acceptance criteria")
    def criteria(self, task: Task) -> str:
        return format_html(
            '<ol class="cairn-list">{}</ol>',
            format_html_join("", "<li>{}</li>", ((item,) for item in task.acceptance_criteria)),
        )

    @admin.display(description="evaluation")
    def evaluation_table(self, task: Task) -> str:
        """Every contribution in the order received; what each said only once it is revealed."""
        contributions = task.contributions.select_related("task", "agent").order_by("received_at")
        rows = format_html_join("", "{}", ((_contribution_row(c),) for c in contributions))
        if task.evaluation is None:
            head = format_html(
                "Not evaluated yet: every contribution stays sealed until the deadline, {}.",
                task.deadline_text,
            )
        else:
            counts = ", ".join(
                f"{verdict.replace('_', ' ')} {count}"
                for verdict, count in task.evaluation["counts"].items()
            )
            head = format_html(
                "Rule <code>{}</code>: {}. Verdicts: {}.",
                task.evaluation["rule"],
                task_state(task),
                counts,
            )
        if not rows:
            return format_html('<p class="cairn-note">{} No contributions were received.</p>', head)
        return format_html(
            '<p class="cairn-note">{}</p><div class="cairn-table"><table class="cairn-evaluation">'
            "<thead><tr><th>contribution</th><th>verdict</th><th>report digest</th>"
            "<th>received</th><th>report</th></tr></thead><tbody>{}</tbody></table></div>",
            head,
            rows,
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

    list_display = ["short_id", "task_title", "sender", "received_at", "sealed"]
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
        "digest",
        "revealed_report",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Contribution]:
        return super().get_queryset(request).defer("sealed_report")

    @admin.display(description="id", ordering="id")
    def short_id(self, contribution: Contribution) -> str:
        """The start of the id, the whole on hover: room for the task's title on a phone."""
        return format_html('<code title="{}">{}</code>', contribution.id, str(contribution.id)[:8])

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

    @admin.display(description="report digest")
    def digest(self, contribution: Contribution) -> str:
        return _sealed_text(contribution) if is_sealed(contribution) else contribution.report_digest

    @admin.display(description="report")
    def revealed_report(self, contribution: Contribution) -> str:
        report = revealed_report(contribution)
        return _sealed_text(contribution) if report is None else _report(report)


def _sealed_text(contribution: Contribution) -> str:
    return f"Sealed until the task is evaluated (deadline {contribution.task.deadline_text})."


def _utc(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC"


def _links(urls: list[str]) -> SafeString:
    """Agents chose these URLs: links marked as such, each written out whole."""
    return format_html(
        '<ul class="cairn-list">{}</ul>',
        format_html_join(
            "", '<li><a href="{}" rel="{}">{}</a></li>', ((u, AGENT_LINK_REL, u) for u in urls)
        ),
    )


def _items(title: str, items: list[str]) -> SafeString:
    if not items:
        return SafeString("")
    return format_html(
        '<p class="cairn-label">{}</p><ul class="cairn-list">{}</ul>',
        title,
        format_html_join("", "<li>{}</li>", ((item,) for item in items)),
    )


def _report(report: dict[str, Any]) -> SafeString:
    """A revealed report as the public page shows it: the summary, then its lists."""
    return format_html(
        '<div class="cairn-report"><p>{}</p>{}{}{}<p class="cairn-label">sources read</p>{}</div>',
        report["summary"],
        _items("conditions", report["conditions"]),
        _items("attempts", report["attempts"]),
        _items("limitations", report["limitations"]),
        _links(report["source_urls"]),
    )


def _contribution_row(contribution: Contribution) -> SafeString:
    """One row of a task's evaluation table; a sealed contribution shows only who and when. Each
    cell names its column, so that on a phone a row reads as a stacked card."""
    link = format_html(
        '<a href="{}" title="{}"><code>{}</code></a>',
        reverse("admin:tasks_contribution_change", args=[contribution.pk]),
        contribution.id,
        str(contribution.id)[:8],
    )
    report = revealed_report(contribution)
    if report is None:
        return format_html(
            '<tr class="sealed"><td data-label="contribution">{}</td>'
            '<td data-label="verdict" colspan="2">sealed</td><td data-label="received">{}</td>'
            '<td data-label="report">{}</td></tr>',
            link,
            _utc(contribution.received_at),
            _sealed_text(contribution),
        )
    return format_html(
        '<tr><td data-label="contribution">{}</td><td data-label="verdict">{}</td>'
        '<td data-label="report digest"><code>{}</code></td><td data-label="received">{}</td>'
        '<td data-label="report">{}</td></tr>',
        link,
        report["verdict"].replace("_", " "),
        contribution.report_digest,
        _utc(contribution.received_at),
        _report(report),
    )
