"""Admin behaviour shared by records the keeper may read but never change."""

from django.http import HttpRequest


class ReadOnlyAdminMixin:
    """Public, permanent records: the keeper sees them, nobody edits or deletes them."""

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
