"""Cairn as a keyper (SPEC §15.8): a witness that also holds an X25519 key, and releases its
share of a sealed report's key once the deadline plus the merge delay has passed by its own clock.
It trusts nothing the asker says that the log can say instead: the task, its deadline and the
commitment are read from entries proven against a root it cosigned, and the HPKE `info` rebuilt
from them. The first check that fails is the refusal."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Annotated, Any

import orjson
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from django.conf import settings
from pydantic import AfterValidator, Field, PlainValidator, ValidationError

from core import statements
from core.canonical import canonical_json
from core.clock import format_instant, now_ms, parse_instant
from core.payloads import Payload, issue_message, json_path
from ledger.entry_types import CONTRIBUTION, MAX_MERGE_DELAY, TASK
from ledger.keyper_seal import (
    KEY_BYTES,
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
from tasks.payloads import Digest, b64u_bytes, real_instant

_LARGEST_INDEX = 255  # Shamir shares of pycryptodome are numbered within a byte
_Hash = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class ProvenEntry(Payload):
    index: int = Field(ge=0, le=LARGEST_SIZE - 1)
    entry: str = Field(min_length=1)  # its JCS text
    proof: list[_Hash] = Field(max_length=MAX_PROOF_LINES)


class ProvenElsewhere(ProvenEntry):
    """A contribution entry in a later log than its task's names that log and a tree of it."""

    origin: str = Field(min_length=1, max_length=255)
    size: int = Field(ge=1, le=LARGEST_SIZE)


def _proven(value: Any) -> ProvenEntry:
    """Chosen by the input so a refusal names the field itself (`contribution_entry.size`), which
    a union would prefix with the member it tried."""
    elsewhere = isinstance(value, dict) and "origin" in value
    return (ProvenElsewhere if elsewhere else ProvenEntry).model_validate(value)


_Proven = Annotated[ProvenEntry, PlainValidator(_proven)]


class ReleaseRequest(Payload):
    site: str = Field(min_length=1, max_length=255)
    task_id: str = Field(min_length=1, max_length=100)
    contribution_id: str = Field(min_length=1, max_length=100)
    index: int = Field(ge=1, le=_LARGEST_INDEX)
    threshold: int = Field(ge=1, le=_LARGEST_INDEX)
    sealed_share: b64u_bytes(SEALED_SHARE_BYTES, SEALED_SHARE_BYTES, "HPKE enc ‖ ct of a share.")
    ciphertext_digest: Digest
    size: int = Field(ge=1, le=LARGEST_SIZE)
    task_entry: _Proven
    contribution_entry: _Proven


class ReleaseAnswer(Payload):
    """The answer in its form, as a site checks it before it checks that it is true."""

    keyper: str
    share: b64u_bytes(KEY_BYTES, KEY_BYTES, "The keyper's share of the report's key.")
    released_at: Annotated[str, AfterValidator(real_instant)]
    signature: str


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


def release_request_parse(body: bytes) -> ReleaseRequest:
    """Every field checked for its form (not yet its truth); refused for the first at fault."""
    try:
        return ReleaseRequest.model_validate(orjson.loads(body))
    except orjson.JSONDecodeError:
        raise WitnessRefusal(Refused.MALFORMED, "the body is not JSON") from None
    except ValidationError as invalid:
        first = invalid.errors()[0]
        path = json_path(first["loc"])
        raise WitnessRefusal(Refused.MALFORMED, issue_message(first), path=path) from None


def _not_proven(reason: str, path: str) -> WitnessRefusal:
    return WitnessRefusal(Refused.NOT_PROVEN, reason, path=path)


def _cosigned_root(origin: str, size: int) -> bytes:
    """Every proof is checked against such a root, so an unfollowed log is refused here."""
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
    data = entry.entry.encode()
    proof = [bytes.fromhex(item) for item in entry.proof]
    if not inclusion_verify(entry.index, size, leaf_hash(data), proof, root):
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
    try:  # no other JSON value (null, a number, a list) reads as an instant once made text
        return parse_instant(str(fields.get(key)))
    except ValueError:
        raise _not_proven(f"the entry's {key} is not an instant", name) from None


def _share_context(request: ReleaseRequest) -> tuple[ShareContext, datetime]:
    """The share's `info` with the deadline and commitment the log says, and the deadline."""
    size, root = request.size, _cosigned_root(request.site, request.size)
    task = _entry_proven("task_entry", request.task_entry, size, root)
    entry = request.contribution_entry
    if isinstance(entry, ProvenElsewhere):  # in a later log of the task's site (§16.2)
        first, number = origin_place(request.site)
        later_first, later = origin_place(entry.origin)
        if later_first != first or later <= number:
            raise _not_proven(
                f"{entry.origin} is not a later log of {request.site}", "contribution_entry.origin"
            )
        size, root = entry.size, _cosigned_root(entry.origin, entry.size)
    contribution = _entry_proven("contribution_entry", entry, size, root)
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
    if not isinstance(entry, ProvenElsewhere) and entry.index <= request.task_entry.index:
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


def _release_kept(request: ReleaseRequest, sealed_share: bytes, share: bytes) -> bytes:
    """Sign and keep the release, or return the one kept first: racing askers get the same bytes."""
    released_at = format_instant(now_ms())
    claims = release_claims(
        keyper=witness_name(),
        site=request.site,
        task_id=request.task_id,
        contribution_id=request.contribution_id,
        index=request.index,
        share=b64u(share),
        released_at=released_at,
    )
    answer = {field: claims[field] for field in ("keyper", "share", "released_at")}
    answer["signature"] = release_sign(claims, witness_private_key())
    key = {
        "origin": request.site,
        "contribution_id": request.contribution_id,
        "index": request.index,
        "sealed_share_digest": hashlib.sha256(sealed_share).hexdigest(),
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
    sealed_share = b64u_decode(request.sealed_share)
    try:
        share = share_open(
            sealed_share,
            keyper_private_key(),
            context,
            keyper=witness_name(),
            index=request.index,
        )
    except SealError as error:
        raise WitnessRefusal(Refused.SHARE_DOES_NOT_OPEN, str(error)) from None
    return _release_kept(request, sealed_share, share)
