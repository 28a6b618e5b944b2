"""What every entry point (manage.py, the ASGI and WSGI applications) does before Django starts."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

ENV_FILE = Path(__file__).resolve().parent.parent / ".env"


def load_settings() -> None:
    """Read `.env` (or the file CAIRN_ENV_FILE names) and load the settings now, so a bad value
    stops start-up with its one-line message instead of a traceback from deep inside Django. The
    file holds `NAME=value` lines, `#` comments and blank lines; the real environment wins over
    it, so a deployment's settings are never overridden by a file left on disk."""
    if settings.configured:  # already loaded, as under pytest: nothing to read or check
        return
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cairn.settings")
    path = Path(os.environ.get("CAIRN_ENV_FILE") or ENV_FILE)
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            sys.exit(f"cairn: {path}, line {number}: expected NAME=value")
        os.environ.setdefault(name.strip(), value.strip())
    try:
        settings.INSTALLED_APPS  # noqa: B018  (touching a setting loads them all)
    except ImproperlyConfigured as exc:
        sys.exit(f"cairn: {exc}")
