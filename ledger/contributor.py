"""What a contributor's client does with a task's public view, built into the verifier's `seal` and
the local MCP server alike (`core.amalgam`): find the task's log entry, seal a report to the
keypers, and ask a keyper's release (SPEC §15.3, §15.8, §16.2)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from ledger.keyper_seal import Keyper, salt_new, seal


def entry_log(
    entry: dict[str, Any], listings: list[list[dict[str, Any]]]
) -> tuple[int, int] | None:
    """Which of a site's logs holds `entry`, as its place among `listings` (each log's
    `<log>/tasks/<id>`, oldest first), and its index there; None when none serves it yet. After a
    restart (§16.2) an older task's entry stays in an earlier log, and its seals are bound there."""
    for place, served in enumerate(listings):
        for item in served:
            if item["entry"] == entry:
                return place, int(item["index"])
    return None


@dataclass(frozen=True)
class EntryProven:
    """An entry and its audit path to the tree of `size` entries of log `origin` the keyper cosigned."""

    origin: str
    size: int
    index: int
    text: str
    proof: list[str]

    def asked(self) -> dict[str, Any]:
        return {"index": self.index, "entry": self.text, "proof": self.proof}


@dataclass(frozen=True)
class KeyperCheckpoint:
    """Where a keyper's witness serves its latest cosigned checkpoint of log `origin`, whose size a
    release's proofs must lead to; the keyper checks its own cosignature, so the client need not."""

    witness_url: str
    origin: str

    @property
    def url(self) -> str:
        log = hashlib.sha256(self.origin.encode()).hexdigest()
        return f"{self.witness_url.rstrip('/')}/{log}/checkpoint"

    def size(self, text: str) -> int | None:
        """The tree size the served `text` names; None when it is no checkpoint of this log."""
        lines = text.split("\n")
        if len(lines) < 3 or lines[0] != self.origin or not lines[1].isdigit():
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
    """What a keyper's `/release` is asked for one sealed share (§15.8, §16.2)."""
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
    """`report` sealed to the keypers, as its contributor keeps it: with the report and salt that
    open its commitment again, the only proof of what a void withheld."""
    salt = salt_new()
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
