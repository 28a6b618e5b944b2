"""A log line and an audit entry of each keeper login. Guessing is django-axes': it counts failures
in the database, so every web process sees one count, and refuses a login over its limit unchecked."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.defaultfilters import pluralize

from agents.services import audit_keeper_action

log = logging.getLogger(__name__)

_PASSWORD_CHECKED = "cairn_password_checked"
# The longest account name an audit entry keeps (its object id's length).
_NAME_LENGTH = 64


class PasswordBackend(ModelBackend):
    """Django's password check, noting on the request that it ran."""

    def authenticate(self, request: HttpRequest | None, *args: Any, **kwargs: Any) -> User | None:
        if request is not None:
            setattr(request, _PASSWORD_CHECKED, True)
        return super().authenticate(request, *args, **kwargs)


def _logged_name(name: str) -> str:
    """The account a failed login named, if it exists: a keeper who typed the password into the
    name field would put it in the log line (the audit log, in the database, keeps it)."""
    return name if User.objects.filter(username=name).exists() else "an unknown account"


def _audit(operation: str, name: str) -> None:
    audit_keeper_action(operation=operation, object_type="login", object_id=name[:_NAME_LENGTH])


def logged_in(sender: Any, request: HttpRequest, user: AbstractBaseUser, **kwargs: Any) -> None:
    """A login with a password (not a session a test or a script made with `force_login`)."""
    if not getattr(request, _PASSWORD_CHECKED, False):
        return
    name = user.get_username()
    log.info("the keeper %s logged in from %s", name, request.META.get("REMOTE_ADDR", ""))
    _audit("keeper_login", name)


def login_failed(
    sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs: Any
) -> None:
    """A wrong password, or a login the lock refused unchecked."""
    if request is None:
        return  # authenticate() called outside a request: no login page was used
    name = str(credentials.get("username", ""))
    checked = getattr(request, _PASSWORD_CHECKED, False)
    outcome = (
        "failed: wrong password" if checked else "was refused unchecked: too many failed logins"
    )
    address = request.META.get("REMOTE_ADDR", "")
    log.info("a keeper login as %s from %s %s", _logged_name(name), address, outcome)
    _audit("keeper_login_failed" if checked else "keeper_login_refused", name)


def locked_out(
    request: HttpRequest, original_response: HttpResponse | None, credentials: dict | None
) -> HttpResponse:
    """`AXES_LOCKOUT_CALLABLE`: 429 with `Retry-After` and a page that says why and for how long."""
    seconds = int(settings.AXES_COOLOFF_TIME.total_seconds())
    context = {
        **admin.site.each_context(request),
        "title": "Login locked",
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "cooloff": _duration(seconds),
    }
    response = render(request, "admin/locked_out.html", context, status=429)
    response["Retry-After"] = str(seconds)
    return response


def _duration(seconds: int) -> str:
    minutes, rest = divmod(seconds, 60)
    if minutes and not rest:
        return f"{minutes} minute{pluralize(minutes)}"
    return f"{seconds} second{pluralize(seconds)}"
