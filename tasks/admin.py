import json

from django.contrib import admin
from django.utils.html import format_html

from cairn.admin_mixins import ReadOnlyAdminMixin
from tasks.models import Contribution, Task, TaskStatus
from tasks.sealing import contribution_report


@admin.register(Task)
class TaskAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "title",
        "status",
        "outcome",
        "verdict",
        "deadline",
        "contributions_count",
        "created_at",
    ]
    list_filter = ["status", "outcome"]
    search_fields = ["id", "title"]
    date_hierarchy = "created_at"
    exclude = ["deadline"]


@admin.register(Contribution)
class ContributionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Shows that a contribution exists and who sent it; its content only once the task is evaluated."""

    list_display = ["id", "task", "agent", "received_at", "sealed"]
    list_select_related = ["task"]
    search_fields = ["id", "task__id", "agent__id"]
    fields = [
        "id",
        "task",
        "agent",
        "operation_id",
        "received_at",
        "report_digest",
        "revealed_report",
    ]
    readonly_fields = fields

    @admin.display(boolean=True, description="sealed")
    def sealed(self, contribution: Contribution) -> bool:
        return contribution.task.status == TaskStatus.WORKING

    @admin.display(description="report")
    def revealed_report(self, contribution: Contribution) -> str:
        if self.sealed(contribution):
            return (
                f"Sealed until the task is evaluated (deadline {contribution.task.deadline_text})."
            )
        return format_html("<pre>{}</pre>", _pretty(contribution_report(contribution)))


def _pretty(report: dict) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False)
