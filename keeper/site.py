"""The keeper's admin site, branded as Cairn (SPEC §13)."""

from typing import Any

from axes.apps import AppConfig as AxesConfig
from django.apps import apps
from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.db import transaction
from django.http import HttpRequest, HttpResponse

from core import statements

# The logins' advisory lock: "kpr" as an integer.
LOGIN_LOCK = int.from_bytes(b"kpr", "big")


class CairnAdminSite(admin.AdminSite):
    site_header = "Cairn keeper"
    site_title = "Cairn keeper"
    index_title = "The keeper's desk"
    # The index lists every model; a sidebar would take a quarter of a 1280 px screen.
    enable_nav_sidebar = False

    def login(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """Under the logins' lock, so that two web processes cannot both find the failure count
        under its limit and both check a password."""
        if request.method != "POST":
            return super().login(request, extra_context)
        with transaction.atomic():
            statements.advisory_lock(LOGIN_LOCK, 0)
            return super().login(request, extra_context)


# Registered, but of no use to the keeper: the worker's tables (/metrics watches it), groups (a
# keeper is a superuser), axes' logs of every login (the audit log keeps each). Axes' access
# attempts stay: deleting one lifts its lockout.
NOT_THE_KEEPERS = (
    "django_q.Schedule",
    "django_q.Success",
    "django_q.Failure",
    "django_q.OrmQ",
    "auth.Group",
    "axes.AccessLog",
    "axes.AccessFailureLog",
)


class LoginLockoutConfig(AxesConfig):
    verbose_name = "Login lockout"


class CairnAdminConfig(AdminConfig):
    default_site = "keeper.site.CairnAdminSite"

    def ready(self) -> None:
        super().ready()  # every app's admin module has registered its models
        for label in NOT_THE_KEEPERS:
            model = apps.get_model(label)
            if admin.site.is_registered(model):
                admin.site.unregister(model)
        from keeper import logins  # it imports the auth models, which load after this module

        user_logged_in.connect(logins.logged_in, dispatch_uid="cairn-keeper-logged-in")
        user_login_failed.connect(logins.login_failed, dispatch_uid="cairn-keeper-login-failed")
