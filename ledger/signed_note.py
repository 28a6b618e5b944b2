"""C2SP signed notes, checkpoints and Ed25519 cosignatures (`signed-note`, `tlog-checkpoint`,
`tlog-cosignature`). Nothing here reads Django's settings, so the settings can check a key with it.

    <origin>\n<tree size>\n<base64 root hash>\n          the note's body
    \n
    — <key name> <base64(key ID ‖ signature)>\n          one line per signature
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ED25519 = 0x01  # a log's (or any note's) Ed25519 signature
COSIGNATURE_V1 = 0x04  # a witness's timestamped Ed25519 cosignature
MAX_PROOF_LINES = 63
_NAME = re.compile(r"[^\s+]+")
DECIMAL = re.compile(r"0|[1-9][0-9]{0,18}")


class NoteError(ValueError):
    """A note, key or signature that is malformed or does not verify; the message says which."""


@dataclass(frozen=True)
class VerifierKey:
    """A signed-note verifier key: `<name>+<key ID hex>+<base64(type ‖ public key)>`."""

    name: str
    key_id: bytes
    type: int
    public: bytes

    @property
    def text(self) -> str:
        material = base64.b64encode(bytes([self.type]) + self.public).decode()
        return f"{self.name}+{self.key_id.hex()}+{material}"

    def verify(self, message: bytes, signature: bytes) -> None:
        try:
            Ed25519PublicKey.from_public_bytes(self.public).verify(signature, message)
        except InvalidSignature:
            raise NoteError(f"the signature by {self.name} does not verify") from None


def verifier_key(name: str, type: int, public: bytes) -> VerifierKey:
    key_id = hashlib.sha256(name.encode() + b"\n" + bytes([type]) + public).digest()[:4]
    return VerifierKey(name, key_id, type, public)


def verifier_key_parse(text: str, *, type: int) -> VerifierKey:
    parts = text.strip().split("+", 2)  # the base64 key may hold "+", a name may not
    if len(parts) != 3 or not _NAME.fullmatch(parts[0]):
        raise NoteError(f"{text!r} is not a verifier key (<name>+<key ID hex>+<base64 key>)")
    name, id_hex, material = parts
    try:
        raw = base64.b64decode(material, validate=True)
        given_id = bytes.fromhex(id_hex)
    except ValueError:
        raise NoteError(f"the verifier key of {name} is not hex and base64") from None
    if len(raw) != 33 or raw[0] != type:
        raise NoteError(f"the verifier key of {name} is not an Ed25519 key of type 0x{type:02x}")
    key = verifier_key(name, type, raw[1:])
    if key.key_id != given_id:
        raise NoteError(f"the verifier key of {name} names the wrong key ID")
    return key


def private_verifier_key(name: str, private: Ed25519PrivateKey, *, type: int) -> VerifierKey:
    return verifier_key(name, type, private.public_key().public_bytes_raw())


@dataclass(frozen=True)
class NoteSignature:
    name: str
    key_id: bytes
    signature: bytes  # after the key ID

    @property
    def line(self) -> str:
        return f"\u2014 {self.name} {base64.b64encode(self.key_id + self.signature).decode()}\n"


@dataclass(frozen=True)
class Note:
    body: str  # ends with a newline: the signed text
    signatures: list[NoteSignature]

    def signed_by(self, key: VerifierKey) -> NoteSignature | None:
        return next(
            (s for s in self.signatures if s.name == key.name and s.key_id == key.key_id), None
        )

    @property
    def text(self) -> str:
        return self.body + "\n" + "".join(s.line for s in self.signatures)


def signature_lines_parse(text: str) -> list[NoteSignature]:
    signatures = []
    for line in text.split("\n"):
        if not line:
            continue
        match = re.fullmatch(r"\u2014 ([^\s]+) ([A-Za-z0-9+/=]+)", line)
        if match is None:
            raise NoteError("a signature line is not `— <name> <base64>`")
        try:
            raw = base64.b64decode(match[2], validate=True)
        except binascii.Error:
            raise NoteError(f"the signature by {match[1]} is not base64") from None
        if len(raw) < 5:
            raise NoteError(f"the signature by {match[1]} is too short")
        signatures.append(NoteSignature(match[1], raw[:4], raw[4:]))
    return signatures


def note_parse(text: str) -> Note:
    body, separator, rest = text.partition("\n\n")
    if not separator or not rest.endswith("\n") or "\r" in text:
        raise NoteError("not a signed note (a body, a blank line, signature lines)")
    signatures = signature_lines_parse(rest)
    if not signatures:
        raise NoteError("the note carries no signature")
    return Note(body + "\n", signatures)


@dataclass(frozen=True)
class CheckpointBody:
    origin: str
    tree_size: int
    root: bytes


def checkpoint_body_text(origin: str, tree_size: int, root: bytes) -> str:
    return f"{origin}\n{tree_size}\n{base64.b64encode(root).decode()}\n"


def checkpoint_body_parse(body: str) -> CheckpointBody:
    lines = body.split("\n")
    if len(lines) < 4 or lines[-1] != "" or not lines[0]:
        raise NoteError("the checkpoint body is not origin, size and root lines")
    origin, size, root = lines[0], lines[1], lines[2]
    if not DECIMAL.fullmatch(size):
        raise NoteError("the checkpoint's tree size is not a decimal number")
    try:
        root_hash = base64.b64decode(root, validate=True)
    except binascii.Error:
        raise NoteError("the checkpoint's root hash is not base64") from None
    if len(root_hash) != 32:
        raise NoteError("the checkpoint's root hash is not 32 bytes")
    return CheckpointBody(origin, int(size), root_hash)


def note_sign(body: str, name: str, private: Ed25519PrivateKey) -> NoteSignature:
    key = private_verifier_key(name, private, type=ED25519)
    return NoteSignature(name, key.key_id, private.sign(body.encode()))


def note_signature_verify(note: Note, key: VerifierKey) -> None:
    """NoteError when the note's signature by `key` is missing or does not verify."""
    signature = note.signed_by(key)
    if signature is None:
        raise NoteError(f"the note carries no signature by {key.name}")
    key.verify(note.body.encode(), signature.signature)


def _cosigned_message(body: str, timestamp: int) -> bytes:
    return f"cosignature/v1\ntime {timestamp}\n{body}".encode()


def cosignature_sign(
    body: str, name: str, private: Ed25519PrivateKey, *, timestamp: int
) -> NoteSignature:
    key = private_verifier_key(name, private, type=COSIGNATURE_V1)
    signature = private.sign(_cosigned_message(body, timestamp))
    return NoteSignature(name, key.key_id, timestamp.to_bytes(8, "big") + signature)


def cosignature_verify(body: str, signature: NoteSignature, key: VerifierKey) -> int:
    """The cosignature's timestamp, once it verifies with `key`; NoteError otherwise."""
    if signature.name != key.name or signature.key_id != key.key_id:
        raise NoteError(f"the cosignature is not by {key.name}")
    if len(signature.signature) != 72:
        raise NoteError(f"the cosignature by {key.name} is not a timestamped Ed25519 signature")
    timestamp = int.from_bytes(signature.signature[:8], "big")
    if timestamp == 0 or timestamp >= 2**63:
        raise NoteError(f"the cosignature by {key.name} carries no valid timestamp")
    key.verify(_cosigned_message(body, timestamp), signature.signature[8:])
    return timestamp


@dataclass(frozen=True)
class CheckedCheckpoint:
    body: CheckpointBody
    cosigned: dict[str, int]  # each cosigning witness's key text → its timestamp


def checkpoint_checked(
    text: str, log_keys: list[bytes], witnesses: list[VerifierKey]
) -> CheckedCheckpoint:
    """A checkpoint signed by one of the log's raw Ed25519 keys (a signature by any of them that
    does not verify is an error), with the timestamp of each of `witnesses`' cosignatures on it."""
    note = note_parse(text)
    body = checkpoint_body_parse(note.body)
    signed = False
    for public in log_keys:
        key = verifier_key(body.origin, ED25519, public)
        if note.signed_by(key) is not None:
            note_signature_verify(note, key)
            signed = True
    if not signed:
        raise NoteError(f"the checkpoint carries no signature by a pinned key for {body.origin}")
    cosigned = {}
    for witness in witnesses:
        signature = note.signed_by(witness)
        if signature is not None:
            cosigned[witness.text] = cosignature_verify(note.body, signature, witness)
    return CheckedCheckpoint(body, cosigned)
