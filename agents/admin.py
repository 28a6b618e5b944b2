"""The keeper's view of agents and the audit log (SPEC §13)."""

from datetime import timedelta

from django.contrib import admin, messages
from django.db.models import F, OuterRef, Q, QuerySet, Subquery
from django.http import HttpRequest
from django.urls import reverse
from django.utils import formats, timezone
from django.utils.html import format_html
from django.utils.http import urlencode

from agents.models import Agent, AuditEntry
from agents.services import agent_revoke
from keeper.mixins import ChoiceFilter, ReadOnlyAdminMixin, agent_link


class TokenFilter(ChoiceFilter):
    title = "token"
    parameter_name = "token"
    options = {
        "active": ("active", Q(revoked_at__isnull=True)),
        "revoked": ("revoked", Q(revoked_at__isnull=False)),
    }


class LastWriteFilter(ChoiceFilter):
    title = "last write"
    parameter_name = "last_write"
    options = {
        "24h": ("in the last 24 h", lambda now: Q(last_write__gte=now - timedelta(days=1))),
        "7d": ("in the last 7 days", lambda now: Q(last_write__gte=now - timedelta(days=7))),
        "30d+": ("more than 30 days ago", lambda now: Q(last_write__lt=now - timedelta(days=30))),
        "never": ("never", Q(last_write__isnull=True)),
    }


@admin.register(Agent)
class AgentAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["label", "id", "created_at", "last_write", "revoked_at"]
    list_filter = [TokenFilter, LastWriteFilter]
    search_fields = ["id", "label"]
    fields = readonly_fields = ("id", "label", "created_at", "last_write", "revoked_at")
    actions = ["revoke_tokens"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Agent]:
        writes = AuditEntry.objects.filter(agent=OuterRef("pk")).order_by("-at").values("at")
        return super().get_queryset(request).annotate(last_write=Subquery(writes[:1]))

    # "Never" sorts oldest on every database (they order NULLs differently): newest writers lead.
    @admin.display(description="last write", ordering=F("last_write").asc(nulls_first=True))
    def last_write(self, agent: Agent) -> str:
        # Formatted here: the change page shows a method's value as plain text.
        if agent.last_write is None:
            return "never"
        return formats.localize(timezone.template_localtime(agent.last_write))

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        # Needed for the revoke action; every field stays read-only.
        return request.user.is_active and request.user.is_staff

    @admin.action(description="Revoke the tokens of the selected agents")
    def revoke_tokens(self, request: HttpRequest, queryset: QuerySet[Agent]) -> None:
        for agent in queryset:
            agent_revoke(agent=agent)
        self.message_user(request, "The selected tokens are revoked.", messages.SUCCESS)


class ClientFilter(admin.SimpleListFilter):
    """The client an agent declared (such as `cairn_mcp/<version>`), one choice per value seen."""

    title = "client"
    parameter_name = "client"
    NONE = "-"

    def lookups(self, request, model_admin):
        seen = AuditEntry.objects.order_by("client").values_list("client", flat=True).distinct()
        return [(client or self.NONE, client or "none declared") for client in seen]

    def queryset(self, request, queryset: QuerySet[AuditEntry]) -> QuerySet[AuditEntry]:
        value = self.value()
        if value is None:
            return queryset
        return queryset.filter(client="" if value == self.NONE else value)


_OBJECT_CHANGE = {
    "task": "admin:tasks_task_change",
    "call": "admin:calls_call_change",
    "agent": "admin:agents_agent_change",
}


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["at", "door", "client", "operation", "object", agent_link]
    list_select_related = ["agent"]
    list_filter = ["door", ClientFilter, "operation", "object_type"]
    search_fields = ["object_id", "agent__id", "client"]
    date_hierarchy = "at"

    @admin.display(description="object (its id)", ordering="object_id")
    def object(self, entry: AuditEntry) -> str:
        """The whole id, so it can be copied and searched; the operation names its type."""
        if entry.object_type in _OBJECT_CHANGE:
            url = reverse(_OBJECT_CHANGE[entry.object_type], args=[entry.object_id])
        elif entry.object_type == "contribution":  # keyed by seq in the admin: search for its id
            query = urlencode({"q": entry.object_id})
            url = f"{reverse('admin:tasks_contribution_changelist')}?{query}"
        else:
            return format_html("<code>{}</code>", entry.object_id)
        return format_html('<a href="{}"><code>{}</code></a>', url, entry.object_id)
