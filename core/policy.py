"""The numbers and words every door states, in one place, so no door restates them.

Values the settings own (the body limit) are read from them on each call, so a test's
`override_settings` and a deployment's environment reach every door alike.
"""

from __future__ import annotations

from django.conf import settings

# The most items one page holds, whichever door lists tasks or calls (SPEC §7, §8, §9).
PAGE_CAP = 50
# The realm a missing or bad token is told to authenticate in (SPEC §6).
REALM = "cairn"
WWW_AUTHENTICATE = f'Bearer realm="{REALM}"'


def body_limit() -> int:
    """The largest request body any door reads, in bytes (SPEC §6: `payload_too_large` above it)."""
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE
