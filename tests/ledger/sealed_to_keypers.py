"""Reports sealed to keypers whose keys a test holds, and releases the test makes as those keypers.

`sealed_contribute` sends a `cairn.task.contribution.sealed/0.1` payload through the one write
pipeline (`contribution_submit`), which keeps its envelope and sets the task's keys pending; the
test's keypers must be the site's (`CAIRN_KEYPERS`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from agents.models import Agent, Door
from agents.services import Caller
from core.clock import format_instant
from ledger.keyper_seal import (
    Keyper,
    ShareContext,
    b64u,
    b64u_decode,
    keyper_public,
    release_claims,
    release_sign,
    seal,
    share_open,
)
from ledger.notes import log_origin
from ledger.services import log_sequence
from tasks.models import Contribution, Task
from tasks.selectors import task_entry_logged
from tasks.services import contribution_submit


@dataclass(frozen=True)
class HeldKeyper:
    """A keyper whose private keys the test holds: it opens its shares and signs its releases."""

    name: str
    hpke: X25519PrivateKey
    signing: Ed25519PrivateKey

    @property
    def listed(self) -> Keyper:
        return Keyper(self.name, keyper_public(self.hpke), f"https://{self.name}/api/keyper")


def keypers_held(count: int = 3) -> list[HeldKeyper]:
    return [
        HeldKeyper(
            f"k{i}.example/cairn/witness", X25519PrivateKey.generate(), Ed25519PrivateKey.generate()
        )
        for i in range(1, count + 1)
    ]


def task_entry_index(task: Task) -> int:
    """The leaf index of the task's log entry, sequencing what is queued first."""
    log_sequence()
    logged = task_entry_logged(task.pk)
    assert logged is not None
    return logged.index


def sealed_payload(
    task: Task, report: dict[str, Any], keypers: list[HeldKeyper], *, threshold: int = 2
) -> dict[str, Any]:
    """What a careful client sends: the report sealed to the keypers for this task."""
    return seal(
        report,
        site=log_origin(),
        task_id=str(task.pk),
        task_entry=task_entry_index(task),
        deadline=task.deadline_text,
        keypers=[keyper.listed for keyper in keypers],
        threshold=threshold,
    )


def sealed_contribute(agent: Agent, task: Task, payload: dict[str, Any]) -> Contribution:
    """Send the sealed payload as `agent`; the contribution as kept."""
    body = contribution_submit(
        Caller(agent, str(uuid.uuid4()), Door.HTTP), task_id=task.pk, payload=payload
    ).body
    return Contribution.objects.get(id=body["receipt"]["contribution_id"])


def release(
    keyper: HeldKeyper, contribution: Contribution, *, released_at: datetime
) -> dict[str, Any]:
    """What `keyper` answers for its share of the contribution's key: the share opened with the
    `info` rebuilt from the task, deadline and envelope, signed with its key."""
    envelope = contribution.keyper_seal
    task = contribution.task
    share = next(s for s in envelope["shares"] if s["keyper"] == keyper.name)
    context = ShareContext(
        site=log_origin(),
        task_id=str(task.pk),
        task_entry=envelope["task_entry"],
        deadline=task.deadline_text,
        commitment=envelope["commitment"],
        ciphertext_digest=envelope["ciphertext_digest"],
        threshold=envelope["threshold"],
    )
    opened = share_open(
        b64u_decode(share["sealed_share"]),
        keyper.hpke,
        context,
        keyper=keyper.name,
        index=share["index"],
    )
    claims = release_claims(
        keyper=keyper.name,
        site=log_origin(),
        task_id=str(task.pk),
        contribution_id=str(contribution.id),
        index=share["index"],
        share=b64u(opened),
        released_at=format_instant(released_at),
    )
    return {
        "keyper": keyper.name,
        "index": share["index"],
        "share": claims["share"],
        "released_at": claims["released_at"],
        "signature": release_sign(claims, keyper.signing),
    }


def releases_keep(
    contribution: Contribution, keypers: list[HeldKeyper], *, released_at: datetime
) -> None:
    """Keep the keypers' releases with the contribution, as the collector keeps what it gathered."""
    contribution.refresh_from_db()
    kept = [
        *contribution.releases,
        *(release(k, contribution, released_at=released_at) for k in keypers),
    ]
    Contribution.objects.filter(pk=contribution.pk).update(releases=kept)
    contribution.refresh_from_db()
