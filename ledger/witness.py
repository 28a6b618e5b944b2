"""Cairn as a witness of other logs (SPEC §15.4, C2SP `tlog-witness` and `tlog-cosignature`).

A witness cosigns a checkpoint only if it extends the latest tree it cosigned of that log, so a
log whose readers require its cosignature cannot show them different histories.

    old <size>\n                  the size the submitter believes the witness holds
    <base64 hash>\n               at most 63 lines: the consistency proof from that size
    \n
    <checkpoint note>             origin, size, root, extension lines, blank, signatures
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core import statements
from ledger.keys import configured_private_key
from ledger.merkle import EMPTY_ROOT, consistency_verify
from ledger.models import CosignedCheckpoint, WitnessedLog
from ledger.notes import site_host
from ledger.refusals import Refused, WitnessRefusal
from ledger.signed_note import (
    COSIGNATURE_V1,
    ED25519,
    MAX_PROOF_LINES,
    CheckpointBody,
    Note,
    NoteError,
    VerifierKey,
    checkpoint_body_parse,
    cosignature_sign,
    note_parse,
    private_verifier_key,
    verifier_key_parse,
)

_OLD_SIZE = re.compile(r"old (0|[1-9][0-9]{0,18})")
_PROOF_LINE = re.compile(r"[A-Za-z0-9+/]{43}=")
LARGEST_SIZE = 2**63 - 1  # a tree size the database (a signed 64-bit column) can hold


@dataclass(frozen=True)
class Submission:
    old_size: int
    proof: list[bytes]
    note: Note
    checkpoint: CheckpointBody


def witness_enabled() -> bool:
    return bool(settings.CAIRN_WITNESS_SIGNING_KEY)


def witness_name() -> str:
    return settings.CAIRN_WITNESS_NAME or f"{site_host()}/cairn/witness"


def witness_private_key() -> Ed25519PrivateKey:
    return configured_private_key("CAIRN_WITNESS_SIGNING_KEY", Ed25519PrivateKey)


def witness_verifier_key() -> VerifierKey:
    return private_verifier_key(witness_name(), witness_private_key(), type=COSIGNATURE_V1)


def witnessed_logs() -> dict[str, list[VerifierKey]]:
    """The logs followed, by origin (a log's key name is its origin)."""
    logs: dict[str, list[VerifierKey]] = {}
    for text in settings.CAIRN_WITNESSED_LOGS:
        key = verifier_key_parse(text, type=ED25519)
        logs.setdefault(key.name, []).append(key)
    return logs


def witness_description() -> dict[str, Any]:
    key = witness_verifier_key()
    return {"name": key.name, "key": key.text, "logs": list(witnessed_logs())}


def _malformed(reason: str) -> WitnessRefusal:
    return WitnessRefusal(Refused.MALFORMED, reason)


def submission_parse(body: bytes) -> Submission:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise _malformed("the body is not UTF-8 text") from None
    head, separator, note_text = text.partition("\n\n")
    lines = head.split("\n")
    if not separator:
        raise _malformed(
            "the body is not an old size line, proof lines, a blank line, a checkpoint"
        )
    old = _OLD_SIZE.fullmatch(lines[0])
    if old is None:
        raise _malformed("the first line is not `old <size>` in decimal")
    if len(lines) - 1 > MAX_PROOF_LINES:
        raise _malformed(f"the consistency proof has more than {MAX_PROOF_LINES} lines")
    if not all(_PROOF_LINE.fullmatch(line) for line in lines[1:]):
        raise _malformed("a consistency proof line is not one SHA-256 hash in base64")
    proof = [base64.b64decode(line) for line in lines[1:]]
    try:
        note = note_parse(note_text)
        checkpoint = checkpoint_body_parse(note.body)
    except NoteError as error:
        raise _malformed(f"the checkpoint is malformed: {error}") from None
    if max(int(old[1]), checkpoint.tree_size) > LARGEST_SIZE:
        raise _malformed("a tree size is beyond 2^63 - 1")
    return Submission(int(old[1]), proof, note, checkpoint)


def _check_signed(note: Note, origin: str) -> None:
    """A signature by one of the log's keys, and none by them that fails; others are ignored."""
    keys = witnessed_logs().get(origin)
    if keys is None:
        raise WitnessRefusal(Refused.UNKNOWN_LOG, "this witness does not follow that log")
    ours = [
        (k, s) for k in keys for s in note.signatures if (s.name, s.key_id) == (k.name, k.key_id)
    ]
    if not ours:
        raise WitnessRefusal(
            Refused.BAD_SIGNATURE, f"the checkpoint is not signed by {origin}'s key"
        )
    for key, signature in ours:
        try:
            key.verify(note.body.encode(), signature.signature)
        except NoteError:
            raise WitnessRefusal(
                Refused.BAD_SIGNATURE, f"the signature by {origin}'s key does not verify"
            ) from None


def _locked_state(origin: str) -> WitnessedLog:
    """The log's row, locked until the transaction ends, so racing submissions cannot both advance
    it nor a slower one roll it back. Made first at size 0, so there is always a row to lock (a
    second maker waits on the unique origin, then finds it)."""
    statements.write_all(
        statements.inserted(
            WitnessedLog,
            {
                "origin": origin,
                "tree_size": 0,
                "root_hash": EMPTY_ROOT,
                "updated_at": timezone.now(),
            },
            ignore_conflicts=True,
        )
    )
    [state] = statements.locked(
        WitnessedLog, f"{statements.column(WitnessedLog, 'origin')} = %s", [origin]
    )
    return state


def _check_consistent(submission: Submission, state: WitnessedLog) -> None:
    checkpoint = submission.checkpoint
    if checkpoint.tree_size == 0 and checkpoint.root != EMPTY_ROOT:
        raise WitnessRefusal(
            Refused.INCONSISTENT, "a checkpoint of size 0 must have the empty tree's root"
        )
    if submission.old_size == 0 and submission.proof:
        raise WitnessRefusal(Refused.INCONSISTENT, "from size 0 the consistency proof is empty")
    if submission.old_size == checkpoint.tree_size and checkpoint.root != bytes(state.root_hash):
        raise WitnessRefusal(
            Refused.INCONSISTENT,
            f"this witness cosigned a different root for size {checkpoint.tree_size}",
        )
    if not consistency_verify(
        submission.old_size,
        checkpoint.tree_size,
        bytes(state.root_hash),
        checkpoint.root,
        submission.proof,
    ):
        raise WitnessRefusal(
            Refused.INCONSISTENT,
            f"the consistency proof from size {submission.old_size} does not verify",
        )


def add_checkpoint(body: bytes) -> str:
    """The cosignature line, once recorded; WitnessRefusal says why not, with nothing recorded."""
    submission = submission_parse(body)
    checkpoint = submission.checkpoint
    _check_signed(submission.note, checkpoint.origin)
    if submission.old_size > checkpoint.tree_size:
        raise _malformed(
            f"the old size {submission.old_size} is beyond the checkpoint's {checkpoint.tree_size}"
        )
    with transaction.atomic():
        state = _locked_state(checkpoint.origin)
        if submission.old_size != state.tree_size:
            raise WitnessRefusal(
                Refused.STALE_OLD_SIZE,
                f"this witness last cosigned size {state.tree_size}",
                size=state.tree_size,
            )
        _check_consistent(submission, state)
        now = timezone.now()
        signature = cosignature_sign(
            submission.note.body,
            witness_name(),
            witness_private_key(),
            timestamp=int(now.timestamp()),
        )
        state.tree_size, state.root_hash = checkpoint.tree_size, checkpoint.root
        state.updated_at = now
        statements.write_all(
            statements.updated(state, ["tree_size", "root_hash", "updated_at"]),
            statements.inserted(
                CosignedCheckpoint,
                {
                    "origin": checkpoint.origin,
                    "tree_size": checkpoint.tree_size,
                    "root_hash": checkpoint.root,
                    "note": submission.note.text + signature.line,
                    "cosigned_at": now,
                },
                ignore_conflicts=True,
            ),
        )
    return signature.line


def cosigned_latest(origin_digest: str) -> str | None:
    """What `GET <witness URL>/<hex SHA-256 of origin>/checkpoint` serves (§15.8)."""
    followed = [
        o for o in witnessed_logs() if hashlib.sha256(o.encode()).hexdigest() == origin_digest
    ]
    return (
        CosignedCheckpoint.objects.filter(origin__in=followed)
        .order_by("-tree_size")
        .values_list("note", flat=True)
        .first()
    )
