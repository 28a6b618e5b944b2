"""Cairn as a keyper (SPEC §15.8): a witness that also holds an X25519 key, and releases its
share of a sealed report's key once the deadline has passed, proven by the log it witnesses.

It trusts nothing the asker says that the log can say instead: the task, its deadline and the
commitment are read from entries proven against a root this keyper cosigned, the HPKE `info` is
rebuilt from them, and the time is its own clock's. So a forged task entry, an earlier deadline or
another task's entry gets nothing, and nobody gets a share before the deadline plus the merge delay.

The first check that fails is the answer: malformed (400), a log not followed (404), proofs and
entries that do not hold (422), too early (425, with when it will release), a share that does not
open (403).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from datetime import datetime
from typing import Any

import orjson
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from django.conf import settings

from core import statements
from core.canonical import canonical_json
from core.clock import format_instant, now_ms, parse_instant
from ledger.entry_types import CONTRIBUTION, MAX_MERGE_DELAY, TASK
from ledger.keyper_seal import (
    SEALED_SHARE_BYTES,
    SUITE_NAME,
    SealError,
    ShareContext,
    b64u,
    b64u_decode,
    keyper_public,
    release_claims,
    release_sign,
    share_open,
)
from ledger.keys import configured_private_key
from ledger.logs import origin_place
from ledger.merkle import inclusion_verify, leaf_hash
from ledger.models import CosignedCheckpoint, KeyperRelease
from ledger.refusals import Refused, WitnessRefusal
from ledger.signed_note import MAX_PROOF_LINES
from ledger.witness import (
    LARGEST_SIZE,
    witness_enabled,
    witness_name,
    witness_private_key,
    witnessed_logs,
)

_LARGEST_INDEX = 255  # Shamir shares of pycryptodome are numbered within a byte
_HASH = re.compile(r"[0-9a-f]{64}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_ENTRY_FIELDS = ("index", "entry", "proof")
# A contribution entry in a later log than its task's also names that log and a tree of it.
_ELSEWHERE_FIELDS = (*_ENTRY_FIELDS, "origin", "size")


@dataclasses.dataclass(frozen=True)
class ProvenEntry:
    """`origin` and `size` name the log and tree it is proven in when they are not the request's."""

    index: int
    text: str
    proof: list[bytes]
    origin: str | None = None
    size: int | None = None


@dataclasses.dataclass(frozen=True)
class ReleaseRequest:
    site: str
    task_id: str
    contribution_id: str
    index: int
    threshold: int
    sealed_share: bytes
    ciphertext_digest: str
    size: int
    task_entry: ProvenEntry
    contribution_entry: ProvenEntry


_FIELDS = tuple(field.name for field in dataclasses.fields(ReleaseRequest))


def keyper_enabled() -> bool:
    """Its releases are signed with the witness key, so both keys are needed."""
    return bool(settings.CAIRN_KEYPER_KEY) and witness_enabled()


def keyper_private_key() -> X25519PrivateKey:
    return configured_private_key("CAIRN_KEYPER_KEY", X25519PrivateKey)


def keyper_description() -> dict[str, Any]:
    """`GET /api/keyper`: what a site lists in `CAIRN_KEYPERS` to seal to this keyper."""
    return {
        "name": witness_name(),
        "hpke_key": keyper_public(keyper_private_key()),
        "suite": SUITE_NAME,
        "logs": list(witnessed_logs()),
    }


def _malformed(path: str, message: str) -> WitnessRefusal:
    return WitnessRefusal(Refused.MALFORMED, f"{path}: {message}" if path else message, path=path)


def _object(value: Any, path: str, names: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _malformed(path, "must be a JSON object")
    for name in names:
        if name not in value:
            raise _malformed(f"{path}.{name}" if path else name, "is required")
    for name in value:
        if name not in names:
            raise _malformed(f"{path}.{name}" if path else name, "is not a field of a release")
    return value


def _text(value: Any, path: str, *, longest: int) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= longest:
        raise _malformed(path, f"must be a string of 1 to {longest} characters")
    return value


def _count(value: Any, path: str, *, least: int, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise _malformed(path, f"must be a whole number from {least} to {most}")
    return value


def _proven_entry(value: Any, path: str) -> ProvenEntry:
    names = _ELSEWHERE_FIELDS if isinstance(value, dict) and "origin" in value else _ENTRY_FIELDS
    fields = _object(value, path, names)
    index = _count(fields["index"], f"{path}.index", least=0, most=LARGEST_SIZE - 1)
    text = fields["entry"]
    if not isinstance(text, str) or not text:
        raise _malformed(f"{path}.entry", "must be the entry's JCS text, a string")
    proof = fields["proof"]
    if not isinstance(proof, list) or len(proof) > MAX_PROOF_LINES:
        raise _malformed(f"{path}.proof", f"must be a list of at most {MAX_PROOF_LINES} hashes")
    for n, item in enumerate(proof):
        if not isinstance(item, str) or not _HASH.fullmatch(item):
            raise _malformed(f"{path}.proof[{n}]", "must be a SHA-256 hash in lower-case hex")
    hashes = [bytes.fromhex(item) for item in proof]
    if names is _ENTRY_FIELDS:
        return ProvenEntry(index, text, hashes)
    origin = _text(fields["origin"], f"{path}.origin", longest=255)
    size = _count(fields["size"], f"{path}.size", least=1, most=LARGEST_SIZE)
    return ProvenEntry(index, text, hashes, origin, size)


def release_request_parse(body: bytes) -> ReleaseRequest:
    """The request of §15.8, every field checked for its form (not yet for its truth)."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise _malformed("", "the body is not JSON") from None
    fields = _object(value, "", _FIELDS)
    sealed_share = _text(fields["sealed_share"], "sealed_share", longest=4 * SEALED_SHARE_BYTES)
    try:
        share_bytes = b64u_decode(sealed_share)
    except ValueError:
        raise _malformed("sealed_share", "must be base64url without padding") from None
    if len(share_bytes) != SEALED_SHARE_BYTES:
        raise _malformed("sealed_share", f"must hold {SEALED_SHARE_BYTES} bytes (HPKE enc ‖ ct)")
    digest = fields["ciphertext_digest"]
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise _malformed("ciphertext_digest", 'must be "sha256:" and 64 lower-case hex digits')
    return ReleaseRequest(
        site=_text(fields["site"], "site", longest=255),
        task_id=_text(fields["task_id"], "task_id", longest=100),
        contribution_id=_text(fields["contribution_id"], "contribution_id", longest=100),
        index=_count(fields["index"], "index", least=1, most=_LARGEST_INDEX),
        threshold=_count(fields["threshold"], "threshold", least=1, most=_LARGEST_INDEX),
        sealed_share=share_bytes,
        ciphertext_digest=digest,
        size=_count(fields["size"], "size", least=1, most=LARGEST_SIZE),
        task_entry=_proven_entry(fields["task_entry"], "task_entry"),
        contribution_entry=_proven_entry(fields["contribution_entry"], "contribution_entry"),
    )


def _not_proven(reason: str, path: str = "") -> WitnessRefusal:
    return WitnessRefusal(Refused.NOT_PROVEN, f"{path}: {reason}" if path else reason, path=path)


def _cosigned_root(origin: str, size: int) -> bytes:
    """Every proof is checked against such a root, so a log this keyper does not follow is
    refused here."""
    if origin not in witnessed_logs():
        raise WitnessRefusal(Refused.UNKNOWN_LOG, f"this keyper does not follow {origin}")
    root = (
        CosignedCheckpoint.objects.filter(origin=origin, tree_size=size)
        .values_list("root_hash", flat=True)
        .first()
    )
    if root is None:
        raise _not_proven(f"this keyper never cosigned a tree of size {size} of {origin}", "size")
    return bytes(root)


def _entry_proven(name: str, entry: ProvenEntry, size: int, root: bytes) -> dict[str, Any]:
    """The entry's fields, once its bytes are proven under the root. The text must be the JCS form
    the log writes, so no reader can take other values from it (JSON holds no lone surrogate, so
    the text encodes)."""
    data = entry.text.encode()
    if not inclusion_verify(entry.index, size, leaf_hash(data), entry.proof, root):
        raise _not_proven(
            f"the inclusion proof of entry {entry.index} does not verify against the root of "
            f"size {size} this keyper cosigned",
            name,
        )
    try:
        fields = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise _not_proven("the logged entry is not JSON", name) from None
    if not isinstance(fields, dict) or canonical_json(fields) != data:
        raise _not_proven("the logged entry is not a JSON object in JCS form", name)
    return fields


def _instant(fields: dict[str, Any], name: str, key: str) -> datetime:
    value = fields.get(key)
    try:
        if isinstance(value, str):
            return parse_instant(value)
    except ValueError:
        pass
    raise _not_proven(f"the entry's {key} is not an instant", name)


def _in_later_log(request: ReleaseRequest) -> dict[str, Any]:
    """The contribution's entry proven in a later log of the task's site (§16.2), where a site that
    restarted its log writes contributions to a task whose entry stays in the log before."""
    entry = request.contribution_entry
    assert entry.origin is not None and entry.size is not None
    first, number = origin_place(request.site)
    later_first, later = origin_place(entry.origin)
    if later_first != first or later <= number:
        raise _not_proven(
            f"{entry.origin} is not a later log of {request.site}", "contribution_entry.origin"
        )
    root = _cosigned_root(entry.origin, entry.size)
    return _entry_proven("contribution_entry", entry, entry.size, root)


def _share_context(request: ReleaseRequest) -> tuple[ShareContext, datetime]:
    """The share's `info` with the deadline and commitment the log says, and the deadline."""
    root = _cosigned_root(request.site, request.size)
    task = _entry_proven("task_entry", request.task_entry, request.size, root)
    elsewhere = request.contribution_entry.origin is not None
    contribution = (
        _in_later_log(request)
        if elsewhere
        else _entry_proven("contribution_entry", request.contribution_entry, request.size, root)
    )
    if task.get("type") != TASK or task.get("task_id") != request.task_id:
        raise _not_proven(f"the entry is not the {TASK} entry of task_id", "task_entry")
    if (
        contribution.get("type") != CONTRIBUTION
        or contribution.get("task_id") != request.task_id
        or contribution.get("contribution_id") != request.contribution_id
    ):
        raise _not_proven(
            f"the entry is not the {CONTRIBUTION} entry of task_id and contribution_id",
            "contribution_entry",
        )
    commitment = contribution.get("commitment")
    if not isinstance(commitment, str):
        raise _not_proven("the entry carries no commitment", "contribution_entry")
    if not elsewhere and request.contribution_entry.index <= request.task_entry.index:
        raise _not_proven("the entry comes before its task's entry", "contribution_entry")
    deadline_at = _instant(task, "task_entry", "deadline")
    if _instant(contribution, "contribution_entry", "received_at") > deadline_at:
        raise _not_proven(
            "the contribution was received after the task's deadline", "contribution_entry"
        )
    context = ShareContext(
        site=request.site,
        task_id=request.task_id,
        task_entry=request.task_entry.index,
        deadline=task["deadline"],
        commitment=commitment,
        ciphertext_digest=request.ciphertext_digest,
        threshold=request.threshold,
    )
    return context, deadline_at


def _release_kept(request: ReleaseRequest, share: bytes) -> bytes:
    """Sign and keep the release, or give the one made first for the same sealed share: two askers
    racing get one row and the same bytes."""
    released_at = format_instant(now_ms())
    keyper = witness_name()
    share_text = b64u(share)
    claims = release_claims(
        keyper=keyper,
        site=request.site,
        task_id=request.task_id,
        contribution_id=request.contribution_id,
        index=request.index,
        share=share_text,
        released_at=released_at,
    )
    answer = {
        "keyper": keyper,
        "share": share_text,
        "released_at": released_at,
        "signature": release_sign(claims, witness_private_key()),
    }
    key = {
        "origin": request.site,
        "contribution_id": request.contribution_id,
        "index": request.index,
        "sealed_share_digest": hashlib.sha256(request.sealed_share).hexdigest(),
    }
    statements.write_all(
        statements.inserted(
            KeyperRelease,
            {
                **key,
                "body": canonical_json(answer).decode(),
                "released_at": parse_instant(released_at),
            },
            ignore_conflicts=True,
        )
    )
    return KeyperRelease.objects.filter(**key).values_list("body", flat=True).get().encode()


def keyper_release(body: bytes) -> bytes:
    """The same bytes every time for the same sealed share; WitnessRefusal says why not."""
    request = release_request_parse(body)
    context, deadline_at = _share_context(request)
    not_before = deadline_at + MAX_MERGE_DELAY
    if now_ms() < not_before:
        when = format_instant(not_before)
        raise WitnessRefusal(Refused.TOO_EARLY, f"released from {when}", not_before=when)
    try:
        share = share_open(
            request.sealed_share,
            keyper_private_key(),
            context,
            keyper=witness_name(),
            index=request.index,
        )
    except SealError as error:
        raise WitnessRefusal(Refused.SHARE_DOES_NOT_OPEN, str(error)) from None
    return _release_kept(request, share)
