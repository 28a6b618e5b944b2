"""Keypers for tests (SPEC §15.8): generated X25519 keys under witness names, configured as a site
configures them (its settings, or the environment of a process of its own), and payloads sealed
to them as a contributor seals one."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from ledger.keyper_seal import Keyper, keyper_public, seal
from ledger.notes import log_origin
from ledger.services import log_sequence
from ledger.signed_note import COSIGNATURE_V1, private_verifier_key
from tasks.models import Task
from tasks.selectors import task_entry_logged
from tests.factories import contribution_report


@dataclass(frozen=True)
class SiteKeyper:
    """A keyper as its site lists it, with the private keys only the keyper holds."""

    name: str
    private: X25519PrivateKey = field(default_factory=X25519PrivateKey.generate)
    witness_private: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)

    @property
    def url(self) -> str:
        return f"https://{self.name.split('/')[0]}/api/keyper"

    @property
    def keyper(self) -> Keyper:
        return Keyper(self.name, keyper_public(self.private), self.url)

    @property
    def witness_key(self) -> str:
        """Its `cosignature/v1` verifier key: a keyper is a witness under the same name."""
        return private_verifier_key(self.name, self.witness_private, type=COSIGNATURE_V1).text


def keypers_made(count: int = 3) -> list[SiteKeyper]:
    return [SiteKeyper(f"k{n}.keyper.test/cairn/witness") for n in range(1, count + 1)]


def keypers_configure(settings: Any, keypers: list[SiteKeyper], threshold: int) -> None:
    """The site lists `keypers` (each a configured witness too) and their threshold."""
    settings.CAIRN_KEYPERS = [
        {"name": k.name, "hpke_key": k.keyper.hpke_key, "url": k.url} for k in keypers
    ]
    settings.CAIRN_KEYPER_THRESHOLD = threshold
    settings.CAIRN_WITNESSES = [
        {"name": k.name, "key": k.witness_key, "url": k.url.replace("keyper", "witness")}
        for k in keypers
    ]
    settings.CAIRN_WITNESS_QUORUM = len(keypers)


def keypers_environment(keypers: list[SiteKeyper], threshold: int) -> dict[str, str]:
    """The same configuration as the environment of a process of its own gives it."""
    return {
        "CAIRN_KEYPERS": "\n".join(f"{k.name} {k.keyper.hpke_key} {k.url}" for k in keypers),
        "CAIRN_KEYPER_THRESHOLD": str(threshold),
        "CAIRN_WITNESSES": "\n".join(
            f"{k.witness_key} {k.url.replace('keyper', 'witness')}" for k in keypers
        ),
        "CAIRN_WITNESS_QUORUM": str(len(keypers)),
    }


def logged_entry(task: Task) -> int:
    """The index of the task's entry, once the sequencer has taken it into the log."""
    log_sequence()
    logged = task_entry_logged(task.pk)
    assert logged is not None
    return logged.index


def sealed_payload(
    task: Task,
    keypers: list[SiteKeyper],
    threshold: int,
    report: dict[str, Any] | None = None,
    *,
    task_entry: int | None = None,
) -> dict[str, Any]:
    """`cairn.task.contribution.sealed/0.1` for `task`, as a contributor seals it to the
    site's keypers; the task's entry must be in the log (`logged_entry`)."""
    return seal(
        copy.deepcopy(report) if report is not None else contribution_report(),
        site=log_origin(),
        task_id=str(task.pk),
        task_entry=logged_entry(task) if task_entry is None else task_entry,
        deadline=task.deadline_text,
        keypers=[k.keyper for k in keypers],
        threshold=threshold,
    )
