"""Opening a keyper-sealed report at its evaluation (SPEC §15.8): it meets a plain report's rules or
is *void*, counted in no verdict. Each step reads only what is published, so anyone can redo it."""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from core import privacy
from core.canonical import canonical_digest
from core.clock import format_instant
from core.errors import ErrorCode, Refusal, refuse_if
from core.payloads import parse_payload
from core.wire_names import CONTRIBUTION_SCOPE, INCONSISTENT_SHARES, KEYS_UNAVAILABLE
from ledger.entry_types import MAX_MERGE_DELAY
from ledger.keyper_seal import SealError, b64u_decode, key_combine, report_open
from tasks.models import Task
from tasks.payloads import ContributionPayload
from tasks.rules import report_refuse_if_broken
from tasks.sealing import ContributionRow

# Keypers release once the last contributions are under a checkpoint they cosigned (§15.3, §15.8).
RELEASES_AFTER = MAX_MERGE_DELAY
# A release as published: the fields its signature covers, less those the item names.
RELEASE_FIELDS = ("keyper", "index", "share", "released_at", "signature")
# A salt is the server's 32 random bytes in the plain form (§15.2), the contributor's here.
SALT_BYTES = 32


def keys_window() -> timedelta:
    return RELEASES_AFTER + timedelta(seconds=settings.CAIRN_KEYPER_GRACE_S)


def grace_end(task: Task) -> datetime:
    """When a report still without its k agreeing releases is `keys_unavailable`."""
    return task.deadline + keys_window()


@dataclass(frozen=True)
class Opened:
    report: dict[str, Any]
    report_digest: str
    salt: str


@dataclass(frozen=True)
class Void:
    code: str
    message: str


def releases_published(contribution: ContributionRow) -> list[dict[str, Any]]:
    return sorted(
        ({name: release[name] for name in RELEASE_FIELDS} for release in contribution.releases),
        key=lambda release: release["index"],
    )


def sealed_opening(
    contribution: ContributionRow, task: Task, *, site: str, final: bool
) -> Opened | Void | None:
    """The report opened, or why it is void; None while releases still to come may open it: fewer
    than k, or k that do not open it while a keyper has not released (a wrong share looks like a
    bad ciphertext until one share more tells them apart). `final` turns every wait into a void."""
    seal = contribution.keyper_seal
    assert seal is not None, "only a keyper-sealed contribution is opened from releases"
    threshold, keypers = seal["threshold"], len(seal["shares"])
    released = len(contribution.releases)
    if released < threshold:
        if not final:
            return None
        return Void(
            KEYS_UNAVAILABLE,
            f"{released} of the {threshold} keyper releases needed came in by the end of the "
            f"grace, {settings.CAIRN_KEYPER_GRACE_S} s after the keypers began releasing",
        )
    shares: list[tuple[int, bytes]] = []  # a share the keeper's database spoils opens nothing
    try:
        shares = [
            (release["index"], b64u_decode(release["share"]))
            for release in releases_published(contribution)
        ]
        key = key_combine(shares, threshold)
    except (SealError, ValueError) as exc:
        return _inconsistent(shares, seal, task, site=site, reason=str(exc))
    try:
        report, salt = _opened(seal, key, task, site=site)
    except (SealError, ValueError) as exc:
        if not final and released < min(keypers, threshold + 1):
            return None
        return Void(str(ErrorCode.INVALID_PAYLOAD), f"ciphertext: {exc}")
    if not _is_salt(salt):
        return Void(
            str(ErrorCode.INVALID_PAYLOAD),
            f"salt: must be {SALT_BYTES} random bytes, base64url without padding (§15.2)",
        )
    return report_rules_void(report, task) or Opened(report, canonical_digest(report), salt)


def _inconsistent(
    shares: list[tuple[int, bytes]], seal: dict[str, Any], task: Task, *, site: str, reason: str
) -> Void:
    """The void of shares that do not agree. Some k of the published releases may still open the
    report: each k is tried, and one the privacy screen refuses is void for private content."""
    for chosen in itertools.combinations(shares, seal["threshold"]):
        try:
            report, _ = _opened(seal, key_combine(list(chosen), seal["threshold"]), task, site=site)
        except (SealError, ValueError):
            continue
        if private := _private_void(report):
            return private
    return Void(INCONSISTENT_SHARES, f"the released shares do not give one key: {reason}")


def _opened(
    seal: dict[str, Any], key: bytes, task: Task, *, site: str
) -> tuple[dict[str, Any], str]:
    return report_open(
        b64u_decode(seal["ciphertext"]),
        key,
        site=site,
        task_id=str(task.id),
        deadline=task.deadline_text,
        commitment=seal["commitment"],
    )


def _private_void(report: dict[str, Any]) -> Void | None:
    try:
        refuse_if(privacy.screen(privacy.texts_anywhere(report)))
    except Refusal as refusal:
        return Void(str(refusal.code), refusal.message)
    return None


def _is_salt(text: str) -> bool:
    try:
        return len(b64u_decode(text)) == SALT_BYTES
    except ValueError:
        return False


def report_rules_void(report: dict[str, Any], task: Task) -> Void | None:
    """The first rule a plain report meets at receipt that an opened one fails (its approval is its
    own digest's). A void is published openable: one whose text trips the screen is void for it."""
    void = _first_rule_void(report, task)
    if void is None or void.code == ErrorCode.PRIVATE_CONTENT:
        return void
    return _private_void(report) or void


def _first_rule_void(report: dict[str, Any], task: Task) -> Void | None:
    if "approval" in report:
        return Void(
            str(ErrorCode.INVALID_PAYLOAD),
            "approval: a sealed report holds no approval (its envelope's approval covers it)",
        )
    approval = {
        "public_output_digest": canonical_digest(report),
        "public_output": True,
        "scope": CONTRIBUTION_SCOPE,
    }
    try:
        parsed = parse_payload(ContributionPayload, {**report, "approval": approval})
        report_refuse_if_broken(parsed, task.sources)
    except Refusal as refusal:
        return Void(str(refusal.code), refusal.message)
    return None


def sealed_item(contribution: ContributionRow, opening: Opened | Void) -> dict[str, Any]:
    """Its envelope, so anyone can redo the opening or ask the keypers for releases the site did not
    collect, then the report or the void. Void for private content, it publishes no ciphertext,
    shares nor releases: together they are the report."""
    seal = contribution.keyper_seal
    assert seal is not None
    private = isinstance(opening, Void) and opening.code == ErrorCode.PRIVATE_CONTENT
    sealed: dict[str, Any] = {
        "ciphertext_digest": seal["ciphertext_digest"],
        "threshold": seal["threshold"],
    }
    if not private:
        sealed["ciphertext"] = seal["ciphertext"]
        sealed["shares"] = seal["shares"]
        sealed["releases"] = releases_published(contribution)
    item = {
        "contribution_id": str(contribution.id),
        "received_at": format_instant(contribution.received_at),
        "commitment": seal["commitment"],
        "sealed": sealed,
    }
    if isinstance(opening, Void):
        item["void"] = asdict(opening)
    else:
        item.update(report_digest=opening.report_digest, salt=opening.salt, report=opening.report)
    return item
