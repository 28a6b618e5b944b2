"""The rules of SPEC §3.1 and §4.1 beyond shape, as issues; services order all but a report's."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings

from core import privacy
from core.clock import INSTANT_FORM, now_ms, parse_instant, span_words
from core.errors import ErrorCode, Issue, refuse_if
from core.payloads import Payload
from core.wire_names import CONTRIBUTION_SCOPE, OPEN_TASK_SCOPE
from ledger.keyper_seal import Keyper
from tasks.payloads import (
    ContributionApproval,
    ContributionPayload,
    OpenTaskApproval,
    OpenTaskPayload,
    SealedApproval,
    SealedContributionPayload,
)
from tasks.report_checks import report_texts, source_in_task_issues

# What each approval is held to: its scope, and its field with the digest of what was sent, named.
_APPROVALS: dict[type[Payload], tuple[str, str, str]] = {
    OpenTaskApproval: (OPEN_TASK_SCOPE, "public_input_digest", "request"),
    ContributionApproval: (CONTRIBUTION_SCOPE, "public_output_digest", "report"),
    SealedApproval: (CONTRIBUTION_SCOPE, "commitment", "commitment"),
}


def approval_issues(
    approval: OpenTaskApproval | ContributionApproval | SealedApproval, sent: str
) -> list[Issue]:
    """A wrong digest of what was `sent` is reported only once the approval is otherwise right."""
    scope, digest_field, what = _APPROVALS[type(approval)]
    issues = []
    if approval.public_output is not True:
        issues.append(Issue("approval.public_output", ErrorCode.APPROVAL_REQUIRED, "must be true"))
    if approval.scope != scope:
        issues.append(Issue("approval.scope", ErrorCode.APPROVAL_REQUIRED, f'must be "{scope}"'))
    if issues or getattr(approval, digest_field) == sent:
        return issues
    message = f"does not match the {what} sent: the {what} differs from the one approved"
    return [Issue(f"approval.{digest_field}", ErrorCode.PREVIEW_CHANGED, message)]


def keyper_envelope_issues(
    payload: SealedContributionPayload, keypers: list[Keyper]
) -> list[Issue]:
    """One share for each keyper the site lists, in its order, the i-th with Shamir index i
    (SPEC §15.8). Sizes and encodings are the model's."""
    listed = [keyper.name for keyper in keypers]
    issues = []
    if len(payload.shares) != len(listed):
        message = (
            f"holds {len(payload.shares)} shares: this site lists {len(listed)} keypers and "
            f"takes one share for each, in this order: {', '.join(listed)}"
        )
        issues.append(Issue("shares", ErrorCode.INVALID_PAYLOAD, message))
    for position, (share, name) in enumerate(zip(payload.shares, listed, strict=False)):
        nth = position + 1
        if share.keyper != name:
            message = f"must be {name!r}: share {nth} goes to keyper {nth} of those the site lists"
            issues.append(Issue(f"shares[{position}].keyper", ErrorCode.INVALID_PAYLOAD, message))
        if share.index != nth:
            message = f"must be {nth}: the share of keyper {nth} of those the site lists"
            issues.append(Issue(f"shares[{position}].index", ErrorCode.INVALID_PAYLOAD, message))
    return issues


def task_entry_issues(task_entry: int, logged: int | None) -> list[Issue]:
    """`task_entry` is `logged`, the index of the task's own entry (None while it waits for the
    sequencer): every share was sealed to it, and a keyper checks."""
    if logged is None:
        problem = (
            "the task's entry is not in the log yet: retry in a few seconds (the log takes in new "
            "entries within 10 seconds)"
        )
    elif task_entry != logged:
        problem = f"is not this task's log entry, which is entry {logged}"
    else:
        return []
    return [Issue("task_entry", ErrorCode.INVALID_PAYLOAD, problem)]


def _source_problem(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "is not a valid URL"
    if parts.scheme != "https":
        return "must be an https URL"
    if "@" in parts.netloc:
        return "must not carry user information"
    if port is not None or parts.netloc.endswith(":"):
        return "must not name a port"
    if parts.query or url.endswith("?"):
        return "must not have a query string"
    if parts.fragment or url.endswith("#"):
        return "must not have a fragment"
    if parts.hostname not in settings.CAIRN_SOURCE_HOSTS or parts.netloc != parts.hostname:
        allowed = ", ".join(settings.CAIRN_SOURCE_HOSTS)
        return f"host {parts.netloc} is not on this server's source allowlist ({allowed})"
    return None


def source_issues(sources: list[str]) -> list[Issue]:
    return [
        Issue(f"request.sources[{index}]", ErrorCode.SOURCE_NOT_ALLOWED, problem)
        for index, url in enumerate(sources)
        if (problem := _source_problem(url))
    ]


def deadline_issues(deadline_text: str) -> list[Issue]:
    ahead = (parse_instant(deadline_text) - now_ms()).total_seconds()
    if settings.CAIRN_TASK_DEADLINE_MIN_S <= ahead <= settings.CAIRN_TASK_DEADLINE_MAX_S:
        return []
    message = (
        f"must be between {span_words(settings.CAIRN_TASK_DEADLINE_MIN_S)} and "
        f"{span_words(settings.CAIRN_TASK_DEADLINE_MAX_S)} from now, written as {INSTANT_FORM}"
    )
    return [Issue("request.deadline", ErrorCode.DEADLINE_OUT_OF_RANGE, message)]


def open_task_texts(payload: OpenTaskPayload) -> list[tuple[str, str]]:
    request = payload.request
    return [
        ("request.title", request.title),
        ("request.question", request.question),
        *(
            (f"request.acceptance_criteria[{i}]", c)
            for i, c in enumerate(request.acceptance_criteria)
        ),
    ]


def report_refuse_if_broken(payload: ContributionPayload, task_sources: list[str]) -> None:
    """In §6's order: what a plain report meets at receipt and an opened one at evaluation."""
    refuse_if(source_in_task_issues(payload.source_urls, task_sources))
    refuse_if(privacy.screen(report_texts(dict(payload))))
