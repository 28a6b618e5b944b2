"""The keyper seal's wire forms (SPEC §15.8), one definition for the site, the keyper and the
served files (`core.amalgam`). A report's key is split k-of-n (Shamir over GF(2^128)) and share i
sealed to keyper i with HPKE, its `info` naming everything the share is for: a keyper that rebuilds
`info` from the log's values opens only the share meant for that task and deadline."""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

import orjson
from Crypto.Protocol.SecretSharing import Shamir
from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hpke import AEAD, KDF, KEM, Suite

from core.canonical import canonical_digest, canonical_json
from core.wire_names import CONTRIBUTION_SCOPE

SEALED_SCHEMA = "cairn.task.contribution.sealed/0.1"
SCHEME = "cairn.seal/1"
SUITE_NAME = "DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM"
SUITE = Suite(KEM.X25519, KDF.HKDF_SHA256, AEAD.AES_128_GCM)
KEY_BYTES = 16
NONCE_BYTES = 12
# HPKE's `enc` (an X25519 public key) and the sealed 16-byte share with its 16-byte tag.
SEALED_SHARE_BYTES = 32 + KEY_BYTES + 16


class SealError(Exception):
    """A seal that does not open: a wrong key or share, or bytes changed since sealing."""


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64u_decode(text: str) -> bytes:
    """Strict: only the URL-safe alphabet, no padding, and the canonical last character."""
    if not isinstance(text, str) or "=" in text:
        raise ValueError("not base64url without padding")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if b64u(data) != text:
        raise ValueError("not base64url without padding")
    return data


def salt_new() -> str:
    """32 random bytes: what makes a commitment unguessable (§15.2)."""
    return b64u(secrets.token_bytes(32))


def ciphertext_digest(ciphertext: bytes) -> str:
    return "sha256:" + hashlib.sha256(ciphertext).hexdigest()


def commitment_of(report_digest: str, salt: str) -> str:
    """All the log shows of a report until its salt is published, so no one can test a guessed
    report against it (§15.2)."""
    return canonical_digest({"report_digest": report_digest, "salt": salt})


def report_aad(*, site: str, task_id: str, deadline: str, commitment: str) -> bytes:
    return canonical_json(
        {"site": site, "task_id": task_id, "deadline": deadline, "commitment": commitment}
    )


@dataclass(frozen=True)
class ShareContext:
    """Everything a share's `info` binds it to but its keyper and index."""

    site: str
    task_id: str
    task_entry: int
    deadline: str
    commitment: str
    ciphertext_digest: str
    threshold: int

    def info(self, *, keyper: str, index: int) -> bytes:
        return canonical_json({"scheme": SCHEME, **asdict(self), "keyper": keyper, "index": index})


@dataclass(frozen=True)
class Keyper:
    """A keyper as a site lists it (`CAIRN_KEYPERS`): its witness name, HPKE key and URL."""

    name: str
    hpke_key: str  # base64url of the raw X25519 public key
    url: str

    def public_key(self) -> X25519PublicKey:
        return X25519PublicKey.from_public_bytes(b64u_decode(self.hpke_key))


def keyper_public(private: X25519PrivateKey) -> str:
    """The `hpke_key` a keyper publishes: its raw X25519 public key, base64url."""
    return b64u(private.public_key().public_bytes_raw())


def seal(
    report: dict[str, Any],
    *,
    site: str,
    task_id: str,
    task_entry: int,
    deadline: str,
    keypers: list[Keyper],
    threshold: int,
    salt: str | None = None,
) -> dict[str, Any]:
    """The sealed payload of `report` (without its approval), approval included. A contributor
    that keeps the salt to dispute a void gives it; it travels only inside the ciphertext."""
    salt = salt_new() if salt is None else salt
    commitment = commitment_of(canonical_digest(report), salt)
    key = secrets.token_bytes(KEY_BYTES)
    nonce = secrets.token_bytes(NONCE_BYTES)
    aad = report_aad(site=site, task_id=task_id, deadline=deadline, commitment=commitment)
    plaintext = canonical_json({"report": report, "salt": salt})
    ciphertext = nonce + AESGCM(key).encrypt(nonce, plaintext, aad)
    context = ShareContext(
        site=site,
        task_id=task_id,
        task_entry=task_entry,
        deadline=deadline,
        commitment=commitment,
        ciphertext_digest=ciphertext_digest(ciphertext),
        threshold=threshold,
    )
    shares = []
    for (index, share), keyper in zip(
        Shamir.split(threshold, len(keypers), key), keypers, strict=True
    ):
        info = context.info(keyper=keyper.name, index=index)
        sealed_share = SUITE.encrypt(share, keyper.public_key(), info=info)
        shares.append({"keyper": keyper.name, "index": index, "sealed_share": b64u(sealed_share)})
    return {
        "schema": SEALED_SCHEMA,
        "task_entry": task_entry,
        "commitment": commitment,
        "ciphertext": b64u(ciphertext),
        "shares": shares,
        "approval": {"public_output": True, "scope": CONTRIBUTION_SCOPE, "commitment": commitment},
    }


def share_open(
    sealed_share: bytes,
    private: X25519PrivateKey,
    context: ShareContext,
    *,
    keyper: str,
    index: int,
) -> bytes:
    """SealError when the share was sealed for another task, deadline, contribution, keyper or
    index than the `info` the keyper rebuilt."""
    try:
        share = SUITE.decrypt(sealed_share, private, info=context.info(keyper=keyper, index=index))
    except (InvalidTag, ValueError):
        raise SealError(
            "the share does not open for this task, deadline and contribution"
        ) from None
    if len(share) != KEY_BYTES:
        raise SealError(f"the share opened to {len(share)} bytes, not {KEY_BYTES}")
    return share


# GF(2^128) as pycryptodome's Shamir writes its elements: bit i is x^i's coefficient, modulo
# x^128 + x^7 + x^2 + x + 1.
_GF_MODULUS = (1 << 128) | 0x87


def _gf_mul(a: int, b: int) -> int:
    product = 0
    while b:
        if b & 1:
            product ^= a
        b >>= 1
        a <<= 1
        if a >> 128:
            a ^= _GF_MODULUS
    return product


def _gf_inverse(a: int) -> int:
    """Extended Euclid over GF(2)[x]: u = g1·a and v = g2·a modulo the field's polynomial."""
    u, v, g1, g2 = a, _GF_MODULUS, 1, 0
    while u != 1:
        shift = u.bit_length() - v.bit_length()
        if shift < 0:
            u, v, g1, g2, shift = v, u, g2, g1, -shift
        u ^= v << shift
        g1 ^= g2 << shift
    return g1


@lru_cache(maxsize=256)
def _lagrange_at_zero(indices: tuple[int, ...]) -> tuple[int, ...]:
    """Each share's weight in the secret: the same for every key one set of keypers released, so
    computed once (its field inversions are most of a combine)."""
    weights = []
    for j, x_j in enumerate(indices):
        numerator = denominator = 1
        for m, x_m in enumerate(indices):
            if m != j:
                numerator = _gf_mul(numerator, x_m)
                denominator = _gf_mul(denominator, x_j ^ x_m)
        weights.append(_gf_mul(numerator, _gf_inverse(denominator)))
    return tuple(weights)


def shamir_combine(shares: list[tuple[int, bytes]]) -> bytes:
    """pycryptodome's `Shamir.combine(shares)` (its default, `ssss=False`), the same secret from
    the same shares, without its pure-Python field inversion on every call."""
    if any(len(share) != KEY_BYTES for _, share in shares):
        raise ValueError(f"a share is {KEY_BYTES} bytes")
    weights = _lagrange_at_zero(tuple(index for index, _ in shares))
    secret = 0
    for (_, share), weight in zip(shares, weights, strict=True):
        secret ^= _gf_mul(int.from_bytes(share, "big"), weight)
    return secret.to_bytes(KEY_BYTES, "big")


def key_combine(shares: list[tuple[int, bytes]], threshold: int) -> bytes:
    """The key from the released (index, share) pairs. Every share past the first `threshold`
    must lie on their polynomial, or SealError: a share that disagrees was changed by a keyper
    or whoever relayed it."""
    if len({index for index, _ in shares}) != len(shares):
        raise SealError("two released shares have the same index")
    if len(shares) < threshold:
        raise SealError(f"{len(shares)} shares released, {threshold} needed")
    key = shamir_combine(shares[:threshold])
    # k - 1 of the first shares and one more define a polynomial with the key's value at 0 only
    # when that share lies on the first k's polynomial.
    for extra in shares[threshold:]:
        if shamir_combine([*shares[: threshold - 1], extra]) != key:
            raise SealError("the released shares do not agree on one key")
    return key


def report_open(
    ciphertext: bytes, key: bytes, *, site: str, task_id: str, deadline: str, commitment: str
) -> tuple[dict[str, Any], str]:
    """The sealed report and salt; SealError unless they open the logged commitment."""
    if len(ciphertext) < NONCE_BYTES + 16:
        raise SealError("the ciphertext is too short to hold a nonce and a tag")
    aad = report_aad(site=site, task_id=task_id, deadline=deadline, commitment=commitment)
    try:
        plaintext = AESGCM(key).decrypt(ciphertext[:NONCE_BYTES], ciphertext[NONCE_BYTES:], aad)
    except InvalidTag:
        raise SealError("the ciphertext does not open with the released key") from None
    try:
        opened = orjson.loads(plaintext)
    except orjson.JSONDecodeError:
        raise SealError("the ciphertext opens to something that is not JSON") from None
    if (
        not isinstance(opened, dict)
        or set(opened) != {"report", "salt"}
        or not isinstance(opened["report"], dict)
        or not isinstance(opened["salt"], str)
    ):
        raise SealError('the ciphertext does not open to {"report": {...}, "salt": "..."}')
    report, salt = opened["report"], opened["salt"]
    try:
        opened_commitment = commitment_of(canonical_digest(report), salt)
    except ValueError:  # JCS writes no integer beyond 2^53: such a report has no digest
        raise SealError("the opened report cannot be written as canonical JSON") from None
    if opened_commitment != commitment:
        raise SealError("the opened report and salt do not match the logged commitment")
    return report, salt


def release_claims(
    *,
    keyper: str,
    site: str,
    task_id: str,
    contribution_id: str,
    index: int,
    share: str,
    released_at: str,
) -> dict[str, Any]:
    """What a keyper's release signature covers."""
    return {
        "keyper": keyper,
        "site": site,
        "task_id": task_id,
        "contribution_id": contribution_id,
        "index": index,
        "share": share,
        "released_at": released_at,
    }


def release_sign(claims: dict[str, Any], private: Ed25519PrivateKey) -> str:
    return b64u(private.sign(canonical_json(claims)))


def release_verify(claims: dict[str, Any], signature: str, public: Ed25519PublicKey) -> bool:
    try:
        public.verify(b64u_decode(signature), canonical_json(claims))
    except (InvalidSignature, ValueError):
        return False
    return True
