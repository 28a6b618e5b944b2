"""What a contributor's client does with a task's public view, the same in the verifier's `seal`
and in the local MCP server: the task's log entry the view says the log must hold, and a report
sealed to the keypers with what the contributor keeps of it to dispute a void (SPEC §15.3, §15.8).

Both are built with this module's text in them (`core.amalgam`), so it imports nothing of Django.
"""

from __future__ import annotations

import secrets
from typing import Any

from ledger.keyper_seal import Keyper, b64u, seal

TASK_ENTRY = "cairn.log/task"


def task_entry_of(view: dict[str, Any]) -> dict[str, Any]:
    """The task's log entry as its public view says it must read (§15.3)."""
    return {
        "type": TASK_ENTRY,
        "task_id": view["id"],
        "public_input_digest": view["public_input_digest"],
        "deadline": view["deadline"],
        "created_at": view["created_at"],
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
