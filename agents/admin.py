from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from agents.models import Agent, AuditEntry
from agents.services import agent_revoke, audit_keeper_action
from cairn.admin_mixins import ReadOnlyAdminMixin


@admin.register(Agent)
class AgentAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "label", "created_at", "revoked_at"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["id", "label"]
    fields = ["id", "label", "created_at", "revoked_at"]
    readonly_fields = fields
    actions = ["revoke_tokens"]

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        # Needed for the revoke action; every field stays read-only.
        return request.user.is_active and request.user.is_staff

    @admin.action(description="Revoke the tokens of the selected agents")
    def revoke_tokens(self, request: HttpRequest, queryset: QuerySet[Agent]) -> None:
        for agent in queryset:
            if agent.revoked_at is None:
                agent_revoke(agent=agent)
                audit_keeper_action(
                    operation="agent_revoke", object_type="agent", object_id=str(agent.id)
                )
        self.message_user(request, "The selected tokens are revoked.", messages.SUCCESS)


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["at", "door", "client", "operation", "object_type", "object_id", "agent"]
    list_filter = ["door", "operation", "object_type"]
    search_fields = ["object_id", "agent__id", "client"]
    date_hierarchy = "at"
