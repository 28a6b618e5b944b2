"""Admin behaviour shared by records the keeper may read but never change."""

from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from agents.models import Agent


class ReadOnlyAdminMixin:
    """Public, permanent records: the keeper sees them, nobody edits or deletes them."""

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


def agent_link(agent: Agent | None) -> str:
    """An agent as the keeper reads it in a list: its label and the start of its id (the whole id
    on hover), linking to the agent. None is the keeper's own write."""
    if agent is None:
        return "the keeper"
    return format_html(
        '<a href="{}" title="{}">{} <code>{}</code></a>',
        reverse("admin:agents_agent_change", args=[agent.pk]),
        agent.pk,
        agent.label or "agent",
        str(agent.pk)[:8],
    )
