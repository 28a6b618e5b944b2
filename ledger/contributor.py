"""What a contributor's client does with a task's public view, the same in the verifier's `seal`
and in the local MCP server: the task's log entry the view says the log must hold, which of the
site's logs holds it, a report sealed to the keypers with what the contributor keeps of it to
dispute a void, and a keyper's release asked with each entry proven in its own log (SPEC §15.3,
§15.8, §16.2).

Both are built with this module's text in them (`core.amalgam`), so it imports nothing of Django.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

from ledger.entry_types import TASK
from ledger.keyper_seal import Keyper, b64u, seal


def task_entry_of(view: dict[str, Any]) -> dict[str, Any]:
    """The task's log entry as its public view says it must read (§15.3)."""
    return {
        "type": TASK,
        "task_id": view["id"],
        "public_input_digest": view["public_input_digest"],
        "deadline": view["deadline"],
        "created_at": view["created_at"],
    }


def entry_log(
    entry: dict[str, Any], listings: list[list[dict[str, Any]]]
) -> tuple[int, int] | None:
    """Which of a site's logs holds `entry`, as its place among `listings` (each log's listing of
    the task's entries, `<log>/tasks/<id>`, oldest log first), and the index that log serves it
    at; None when none serves it yet. An entry stays in the log it was written to, so after a
    restart (§16.2) an older task's entry is in an earlier log, and what is sealed to the task,
    or released of it, is bound there."""
    for place, served in enumerate(listings):
        for item in served:
            if item["entry"] == entry:
                return place, int(item["index"])
    return None


@dataclass(frozen=True)
class EntryProven:
    """An entry as a release request carries it: proven in the log that holds it (`origin`),
    by the audit path (`proof`) of its JCS text to the tree of `size` entries of that log that
    the keyper cosigned."""

    origin: str
    size: int
    index: int
    text: str
    proof: list[str]

    def asked(self) -> dict[str, Any]:
        return {"index": self.index, "entry": self.text, "proof": self.proof}


def keyper_checkpoint_url(witness_url: str, origin: str) -> str:
    """Where a keyper's witness serves the latest checkpoint of log `origin` it cosigned."""
    return f"{witness_url.rstrip('/')}/{hashlib.sha256(origin.encode()).hexdigest()}/checkpoint"


def keyper_checkpoint_size(text: str, origin: str) -> int | None:
    """The tree size that checkpoint `text`, served by a keyper's witness, names for log
    `origin`; None when it is not a checkpoint of that log. The keyper checks its own
    cosignature when asked for a release, so the client need not."""
    lines = text.split("\n")
    if len(lines) < 3 or lines[0] != origin or not lines[1].isdigit():
        return None
    return int(lines[1])


def release_request(
    share: dict[str, Any],
    *,
    task_id: str,
    contribution_id: str,
    threshold: int,
    ciphertext_digest: str,
    task_entry: EntryProven,
    contribution_entry: EntryProven,
) -> dict[str, Any]:
    """What a keyper's `/release` is asked for one sealed share (§15.8): bound to the log of the
    task's entry; the contribution's entry names its own log and tree when it is in another, a
    later one, written after a restart to a task logged before it (§16.2)."""
    contribution = contribution_entry.asked()
    if contribution_entry.origin != task_entry.origin:
        contribution |= {"origin": contribution_entry.origin, "size": contribution_entry.size}
    return {
        "site": task_entry.origin,
        "task_id": task_id,
        "contribution_id": contribution_id,
        "index": share["index"],
        "threshold": threshold,
        "sealed_share": share["sealed_share"],
        "ciphertext_digest": ciphertext_digest,
        "size": task_entry.size,
        "task_entry": task_entry.asked(),
        "contribution_entry": contribution,
    }


def sealed_kept(
    report: dict[str, Any],
    *,
    cairn_url: str,
    site: str,
    view: dict[str, Any],
    task_entry: int,
    keypers: list[Keyper],
    threshold: int,
) -> dict[str, Any]:
    """`report` sealed to the keypers for the task under a fresh salt, as what its contributor
    keeps: the sealed payload (`sealed`) with the report and salt that open its commitment again,
    the only proof of what a void withheld."""
    salt = b64u(secrets.token_bytes(32))
    payload = seal(
        report,
        site=site,
        task_id=view["id"],
        task_entry=task_entry,
        deadline=view["deadline"],
        keypers=keypers,
        threshold=threshold,
        salt=salt,
    )
    return {
        "cairn_url": cairn_url,
        "site": site,
        "task_id": view["id"],
        "deadline": view["deadline"],
        "commitment": payload["commitment"],
        "report": report,
        "salt": salt,
        "sealed": payload,
    }
