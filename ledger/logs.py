"""The site's logs (SPEC §16.2): log 0, and one more with its own origin each time the keeper runs
`log_restart`. Only the latest grows; the earlier ones are served as they were."""

from __future__ import annotations

from dataclasses import dataclass

from core.errors import ErrorCode, Refusal
from ledger.models import Log
from ledger.notes import log_origin, site_host

LOG_PATH = "/api/log"


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
