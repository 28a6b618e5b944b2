"""Admin behaviour shared by records the keeper may read but never change."""

from collections.abc import Callable
from datetime import datetime
from typing import ClassVar, Protocol, TypeAlias, TypeVar

from django.contrib import admin
from django.db.models import Model, Q, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from agents.models import Agent

M = TypeVar("M", bound=Model)
# A choice's condition: fixed, or made from the current time for a window that moves with it.
Condition: TypeAlias = Q | Callable[[datetime], Q]


class ReadOnlyAdminMixin:
    """Public, permanent records: the keeper sees them, nobody edits or deletes them."""

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


class ChoiceFilter(admin.SimpleListFilter):
    """A list filter whose choices are declared once, in `options`: value → (label, condition). A
    value it does not know, from an old bookmark or a hand-edited URL, leaves the list whole."""

    options: ClassVar[dict[str, tuple[str, Condition]]]

    def lookups(self, request, model_admin):
        return [(value, label) for value, (label, _) in self.options.items()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[M]) -> QuerySet[M]:
        value = self.value()
        if value not in self.options:
            return queryset
        _, condition = self.options[value]
        return queryset.filter(condition(timezone.now()) if callable(condition) else condition)


class _Written(Protocol):
    @property
    def agent(self) -> Agent | None: ...


@admin.display(description="agent", ordering="agent")
def agent_link(record: _Written) -> str:
    """Who wrote a record: a link to its agent, the whole id on hover; no agent is the keeper."""
    agent = record.agent
    if agent is None:
        return "the keeper"
    return format_html(
        '<a href="{}" title="{}">{} <code>{}</code></a>',
        reverse("admin:agents_agent_change", args=[agent.pk]),
        agent.pk,
        agent.label or "agent",
        str(agent.pk)[:8],
    )
