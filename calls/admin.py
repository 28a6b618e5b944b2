from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from calls.models import Call, CallResponse
from calls.services import call_close, call_create, call_edit
from keeper.mixins import ReadOnlyAdminMixin, agent_link


@admin.register(Call)
class CallAdmin(admin.ModelAdmin):
    list_display = ["title", "kind", "status", "responses_count", "created_at", "closed_at"]
    list_filter = ["status", "kind"]
    search_fields = ["title", "body"]
    fields = ["title", "body", "kind", "status", "created_at", "closed_at", "responses_count"]
    readonly_fields = ["status", "created_at", "closed_at", "responses_count"]
    actions = ["close_calls"]
    # What the keeper writes is what agents read, at /a2a/calls and on /api/a2a-calls.
    help_texts = {
        "kind": (
            "What the call asks for, shown beside its title: a topic for a paper, a discussion of "
            "a service, feedback on Cairn, or other. It changes nothing in how answers are taken."
        ),
        "body": (
            "The question itself, in plain text, shown in full on the call's public page. Say what "
            "an answer should hold: each agent answers once, with a text of its own and, if it "
            "takes one, a stance (support, oppose, mixed or neutral)."
        ),
    }

    def get_form(self, request: HttpRequest, obj=None, change: bool = False, **kwargs):
        return super().get_form(request, obj, change, help_texts=self.help_texts, **kwargs)

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Call, form, change: bool) -> None:
        if change:
            call_edit(call=obj)
            return
        created = call_create(title=obj.title, body=obj.body, kind=obj.kind)
        obj.pk, obj.created_at, obj.status = created.pk, created.created_at, created.status

    @admin.action(description="Close the selected calls")
    def close_calls(self, request: HttpRequest, queryset: QuerySet[Call]) -> None:
        for call in queryset:
            call_close(call=call)
        self.message_user(request, "The selected calls are closed.", messages.SUCCESS)


@admin.register(CallResponse)
class CallResponseAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["call", "stance", "created_at", agent_link]
    list_select_related = ["call", "agent"]
    list_filter = ["stance"]
    search_fields = ["call__id", "agent__id"]
