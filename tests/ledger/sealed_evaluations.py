"""Keyper-sealed evaluations built for the verifier's tests: three witnesses that are keypers too
(quorum 2, threshold 2), reports sealed to them with the site's own `ledger.keyper_seal`, their
contribution entries logged through the site's sequencer, releases signed with the witnesses'
keys, and the evaluation published as a saved task file and logged. What an honest or a cheating
keeper would publish, item by item, without the keeper's evaluation code."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from core.canonical import canonical_digest
from core.clock import format_instant, now_ms, parse_instant
from ledger.keyper_seal import (
    Keyper,
    ShareContext,
    b64u,
    b64u_decode,
    ciphertext_digest,
    key_combine,
    keyper_public,
    release_claims,
    release_sign,
    report_open,
    seal,
    share_open,
)
from ledger.keys import receipt_sign
from ledger.notes import log_origin
from ledger.services import log_queue, log_sequence
from ledger.witnesses import witnesses_cosign
from tasks.models import Task, TaskStatus
from tasks.rendered import task_view, tasks_render
from tests.ledger.witness_processes import WitnessProcess

VERDICTS = ("source_supported", "source_contradicted", "source_unclear")
THRESHOLD = 2


@dataclass
class Keypers:
    """The site's keypers: each a witness process, with its HPKE key beside its witness key."""

    witnesses: list[WitnessProcess]
    hpke: list[X25519PrivateKey]
    urls: list[str]

    @property
    def listed(self) -> list[Keyper]:
        return [
            Keyper(witness.name, keyper_public(key), url)
            for witness, key, url in zip(self.witnesses, self.hpke, self.urls, strict=True)
        ]

    def configured(self) -> list[dict[str, str]]:
        """As `CAIRN_KEYPERS` lists them."""
        return [{"name": k.name, "hpke_key": k.hpke_key, "url": k.url} for k in self.listed]

    def pins(self, path: Path, *, threshold: int = THRESHOLD) -> Path:
        """A `--witnesses` file pinning the witnesses (with their URLs), the quorum, the keypers
        and the threshold from a source other than the site's card."""
        lines = [f"{witness.key} {witness.url}" for witness in self.witnesses]
        lines.append("quorum 2")
        lines += [f"keyper {k.name} {k.hpke_key} {k.url}" for k in self.listed]
        lines.append(f"keyper_threshold {threshold}")
        path.write_text("\n".join(lines) + "\n")
        return path

    def signing_key(self, n: int) -> Ed25519PrivateKey:
        return Ed25519PrivateKey.from_private_bytes(bytes.fromhex(self.witnesses[n].seed))


def keypers_made(witnesses: list[WitnessProcess], urls: list[str] | None = None) -> Keypers:
    """Keypers for these witnesses; at `urls`, or where nothing answers a release."""
    return Keypers(
        witnesses,
        [X25519PrivateKey.generate() for _ in witnesses],
        urls or [f"{witness.url}/no-keyper-here" for witness in witnesses],
    )


def sequenced_and_witnessed() -> None:
    log_sequence()
    witnesses_cosign()


@dataclass
class SealedEvaluation:
    """One task and the evaluation its keeper publishes, built item by item."""

    keypers: Keypers
    task: Task
    http: httpx.Client
    items: list[dict[str, Any]] = field(default_factory=list)
    kept: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def deadline(self) -> str:
        return self.task.deadline_text

    @property
    def task_entry_index(self) -> int:
        entries = self.http.get(f"/api/log/tasks/{self.task.id}").json()["entries"]
        return next(e["index"] for e in entries if e["entry"]["type"] == "cairn.log/task")

    def plain(self, receipt: dict[str, Any], report: dict[str, Any]) -> dict[str, Any]:
        """A plain contribution the site took (its receipt), as the evaluation lists it."""
        item = {
            "contribution_id": receipt["contribution_id"],
            "received_at": receipt["received_at"],
            "report_digest": receipt["report_digest"],
            "salt": receipt["salt"],
            "report": report,
        }
        self.items.append(item)
        return item

    def sealed(
        self,
        report: dict[str, Any],
        *,
        released: tuple[int, ...] = (0, 1),
        released_after: timedelta = timedelta(seconds=61),
        void: str | None = None,
        shares: bool = False,
    ) -> dict[str, Any]:
        """A report sealed to the keypers and logged with its commitment; the releases of
        `released` (made `released_after` the deadline); opened, or void with `void`."""
        payload = seal(
            report,
            site=log_origin(),
            task_id=str(self.task.id),
            task_entry=self.task_entry_index,
            deadline=self.deadline,
            keypers=self.keypers.listed,
            threshold=THRESHOLD,
        )
        contribution_id, received_at = str(uuid.uuid4()), format_instant(now_ms())
        log_queue(
            [
                {
                    "type": "cairn.log/contribution",
                    "task_id": str(self.task.id),
                    "contribution_id": contribution_id,
                    "commitment": payload["commitment"],
                    "received_at": received_at,
                }
            ]
        )
        at = format_instant(parse_instant(self.deadline) + released_after)
        releases = [self.release(payload, n, contribution_id, at) for n in released]
        item: dict[str, Any] = {
            "contribution_id": contribution_id,
            "received_at": received_at,
            "commitment": payload["commitment"],
            "sealed": {
                "ciphertext": payload["ciphertext"],
                "ciphertext_digest": ciphertext_digest(b64u_decode(payload["ciphertext"])),
                "threshold": THRESHOLD,
                "releases": releases,
            },
        }
        if shares:
            item["sealed"]["shares"] = payload["shares"]
        if void is None:
            salt = self.salt_of(payload, contribution_id)
            item |= {"report_digest": canonical_digest(report), "salt": salt, "report": report}
        elif void == "private_content":
            item["sealed"] = {
                "ciphertext_digest": item["sealed"]["ciphertext_digest"],
                "threshold": THRESHOLD,
            }
        if void is not None:
            item["void"] = {"code": void, "message": f"void as {void}"}
        self.items.append(item)
        self.kept[contribution_id] = {"payload": payload, "report": report}
        return item

    def _context(self, payload: dict[str, Any]) -> ShareContext:
        return ShareContext(
            site=log_origin(),
            task_id=str(self.task.id),
            task_entry=payload["task_entry"],
            deadline=self.deadline,
            commitment=payload["commitment"],
            ciphertext_digest=ciphertext_digest(b64u_decode(payload["ciphertext"])),
            threshold=THRESHOLD,
        )

    def share(self, payload: dict[str, Any], n: int) -> bytes:
        """Keyper n's share, opened with its own key."""
        sealed = payload["shares"][n]
        return share_open(
            b64u_decode(sealed["sealed_share"]),
            self.keypers.hpke[n],
            self._context(payload),
            keyper=sealed["keyper"],
            index=sealed["index"],
        )

    def release(
        self,
        payload: dict[str, Any],
        n: int,
        contribution_id: str,
        released_at: str,
        *,
        share: bytes | None = None,
        signer: Ed25519PrivateKey | None = None,
    ) -> dict[str, Any]:
        """Keyper n's signed release of its share (or of `share`, signed by `signer`)."""
        name, index = payload["shares"][n]["keyper"], payload["shares"][n]["index"]
        text = b64u(self.share(payload, n) if share is None else share)
        claims = release_claims(
            keyper=name,
            site=log_origin(),
            task_id=str(self.task.id),
            contribution_id=contribution_id,
            index=index,
            share=text,
            released_at=released_at,
        )
        signature = release_sign(claims, signer or self.keypers.signing_key(n))
        return {
            "keyper": name,
            "index": index,
            "share": text,
            "released_at": released_at,
            "signature": signature,
        }

    def salt_of(self, payload: dict[str, Any], contribution_id: str) -> str:
        """The salt inside the ciphertext, as whoever holds two shares reads it."""
        key = key_combine([(i + 1, self.share(payload, i)) for i in (0, 1)], THRESHOLD)
        _, salt = report_open(
            b64u_decode(payload["ciphertext"]),
            key,
            site=log_origin(),
            task_id=str(self.task.id),
            deadline=self.deadline,
            commitment=payload["commitment"],
        )
        return salt

    def receipt(self, item: dict[str, Any]) -> dict[str, Any]:
        """The signed receipt the site gave for a sealed item's contribution (§15.8)."""
        claims = {
            "contribution_id": item["contribution_id"],
            "task_id": str(self.task.id),
            "operation_id": str(uuid.uuid4()),
            "commitment": item["commitment"],
            "ciphertext_digest": item["sealed"]["ciphertext_digest"],
            "sealed": "keypers",
            "received_at": item["received_at"],
            "sealed_until": self.deadline,
        }
        return {**claims, "signature": receipt_sign(claims)}

    def contributor_files(self, item: dict[str, Any], directory: Path) -> tuple[Path, Path]:
        """What its contributor keeps: the receipt, and the report with its salt and the sealed
        payload (as the local MCP keeps them), as two files."""
        payload = self.kept[item["contribution_id"]]["payload"]
        report = self.kept[item["contribution_id"]]["report"]
        salt = self.salt_of(payload, item["contribution_id"])
        receipt_file = directory / f"{item['contribution_id']}.receipt.json"
        receipt_file.write_text(json.dumps(self.receipt(item)))
        report_file = directory / f"{item['contribution_id']}.sealed.json"
        report_file.write_text(json.dumps({"report": report, "salt": salt, "sealed": payload}))
        return receipt_file, report_file

    def published(self, path: Path, *, counted_void: bool = False) -> Path:
        """The evaluation of the items so far, logged (its entry after theirs), published by the
        site as a keeper holding its database would, and saved as the task file a verifier
        reads; the counts over the items that are not void (or over all of them, as a keeper who
        counts a void one would)."""
        sequenced_and_witnessed()
        counted = [i for i in self.items if counted_void or "void" not in i]
        verdicts = [item["report"]["verdict"] for item in counted if "report" in item]
        if len(verdicts) < self.task.min_independent:
            outcome, verdict = "unresolved", None
        elif len(set(verdicts)) == 1:
            outcome, verdict = "resolved", verdicts[0]
        else:
            outcome, verdict = "contested", None
        evaluated_at = format_instant(parse_instant(self.deadline) + timedelta(minutes=12))
        evaluation = {
            "schema": "cairn.evaluation/0.1",
            "rule": "cairn.rules/0.1",
            "outcome": outcome,
            "verdict": verdict,
            "evaluated_at": evaluated_at,
            "min_independent": self.task.min_independent,
            "counts": {name: verdicts.count(name) for name in VERDICTS},
            "contributions": self.items,
        }
        log_queue(
            [
                {
                    "type": "cairn.log/evaluation",
                    "task_id": str(self.task.id),
                    "outcome": outcome,
                    "evaluated_at": evaluated_at,
                    "evaluation_digest": canonical_digest(evaluation),
                }
            ]
        )
        sequenced_and_witnessed()
        Task.objects.filter(pk=self.task.pk).update(
            evaluation=evaluation,
            outcome=outcome,
            verdict=verdict or "",
            status=TaskStatus.FAILED if outcome == "unresolved" else TaskStatus.COMPLETED,
            evaluated_at=parse_instant(evaluated_at),
        )
        tasks_render(Task.objects.filter(pk=self.task.pk))
        path.write_text(json.dumps({"task": task_view(Task.objects.get(pk=self.task.pk))}))
        return path
