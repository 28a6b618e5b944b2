"""The site's logs (SPEC §16.2): log 0, and a new one with its own origin each time the keeper
restarts the log after the database lost entries the site had signed. Only the latest grows; the
earlier ones are served as they were. Log 0 has no row, so a site that never restarted is as before.

Their checkpoints are C2SP signed notes whose key name is the log's origin, `<host>/cairn/log` for
log 0, so a verifier holding the site's public key can check a note without more.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from core.errors import ErrorCode, Refusal
from ledger.keys import site_private_key
from ledger.models import Log
from ledger.signed_note import (
    ED25519,
    VerifierKey,
    checkpoint_body_text,
    note_sign,
    private_verifier_key,
)

LOG_PATH = "/api/log"
DEFAULT_PORTS = {"http": 80, "https": 443}


def site_host() -> str:
    """The host of `CAIRN_SITE_URL`, with its port unless it is the scheme's default."""
    parts = urlsplit(settings.CAIRN_SITE_URL or "http://localhost")
    host = parts.hostname or "localhost"
    if parts.port and parts.port != DEFAULT_PORTS.get(parts.scheme):
        host = f"{host}:{parts.port}"
    return host


def log_origin() -> str:
    """Log 0's origin, which also names the site to its keypers (SPEC §15.8)."""
    return f"{site_host()}/cairn/log"


def log_verifier_key(origin: str | None = None) -> VerifierKey:
    """The key a witness is configured with to follow this site's log (log 0 unless named)."""
    return private_verifier_key(origin or log_origin(), site_private_key(), type=ED25519)


def checkpoint_sign(tree_size: int, root: bytes, origin: str) -> str:
    body = checkpoint_body_text(origin, tree_size, root)
    return body + "\n" + note_sign(body, origin, site_private_key()).line


@dataclass(frozen=True)
class LogRef:
    number: int
    origin: str
    start: int  # the `Leaf.index` of its first leaf

    @property
    def path(self) -> str:
        return LOG_PATH if self.number == 0 else f"{LOG_PATH}/{self.number}"


def log_first() -> LogRef:
    return LogRef(0, log_origin(), 0)


def origin_numbered(number: int) -> str:
    return log_origin() if number == 0 else f"{site_host()}/cairn/log/{number}"


def _ref(row: Log | None) -> LogRef:
    return log_first() if row is None else LogRef(row.number, row.origin, row.start)


def log_current() -> LogRef:
    return _ref(Log.objects.order_by("-number").first())


def log_numbered(number: int) -> LogRef:
    if number == 0:
        return log_first()
    row = Log.objects.filter(number=number).first()
    if row is None:
        raise Refusal(ErrorCode.NOT_FOUND, f"this site has no log {number}")
    return _ref(row)


@dataclass(frozen=True)
class InLog:
    log: LogRef
    index: int


def leaf_in_log(leaf_index: int) -> InLog:
    log = _ref(Log.objects.filter(start__lte=leaf_index).order_by("-start").first())
    return InLog(log, leaf_index - log.start)


def origin_place(origin: str) -> tuple[str, int]:
    """An origin's log 0 and number: `<host>/cairn/log/<n>` is log n of `<host>/cairn/log`, and
    any other origin is a log 0 of its own (§16.2)."""
    first, _, number = origin.rpartition("/")
    if first.endswith("/cairn/log") and number.isdigit() and not number.startswith("0"):
        return first, int(number)
    return origin, 0
