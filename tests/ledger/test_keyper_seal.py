"""SPEC §15.8's wire forms: a report sealed to three keypers opens with any two released shares,
and with nothing else: not another task's, deadline's or keyper's `info`, not a share that
disagrees, not a changed ciphertext."""

from __future__ import annotations

import random

import pytest
import rfc8785
from Crypto.Protocol.SecretSharing import Shamir
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from core.canonical import canonical_digest
from ledger.keyper_seal import (
    Keyper,
    SealError,
    ShareContext,
    b64u,
    b64u_decode,
    ciphertext_digest,
    commitment_of,
    key_combine,
    keyper_public,
    report_aad,
    report_open,
    seal,
    shamir_combine,
    share_open,
)

SITE = "cairn.example/cairn/log"
TASK = "0b6f1a3e-3d0e-4a38-9d5e-2a3c7b8e9f10"
DEADLINE = "2026-12-04T20:00:00.000Z"
REPORT = {"schema": "cairn.task.contribution/0.1", "verdict": "source_supported"}


@pytest.fixture
def keypers() -> list[tuple[Keyper, X25519PrivateKey]]:
    keys = [X25519PrivateKey.generate() for _ in range(3)]
    return [
        (Keyper(f"k{i}.example/cairn/witness", keyper_public(key), f"https://k{i}.example"), key)
        for i, key in enumerate(keys)
    ]


def _sealed(keypers):
    return seal(
        REPORT,
        site=SITE,
        task_id=TASK,
        task_entry=7,
        deadline=DEADLINE,
        keypers=[keyper for keyper, _ in keypers],
        threshold=2,
    )


def _context(payload, **changed) -> ShareContext:
    values = {
        "site": SITE,
        "task_id": TASK,
        "task_entry": 7,
        "deadline": DEADLINE,
        "commitment": payload["commitment"],
        "ciphertext_digest": ciphertext_digest(b64u_decode(payload["ciphertext"])),
        "threshold": 2,
    }
    return ShareContext(**{**values, **changed})


def _shares(payload, keypers, context):
    return [
        (
            share["index"],
            share_open(
                b64u_decode(share["sealed_share"]),
                key,
                context,
                keyper=share["keyper"],
                index=share["index"],
            ),
        )
        for share, (_, key) in zip(payload["shares"], keypers, strict=True)
    ]


def test_any_two_shares_open_the_report_to_its_commitment(keypers):
    payload = _sealed(keypers)
    assert payload["approval"]["commitment"] == payload["commitment"]
    assert [share["index"] for share in payload["shares"]] == [1, 2, 3]
    shares = _shares(payload, keypers, _context(payload))
    ciphertext = b64u_decode(payload["ciphertext"])
    for pair in ([shares[0], shares[1]], [shares[1], shares[2]], [shares[2], shares[0]]):
        report, salt = report_open(
            ciphertext,
            key_combine(pair, 2),
            site=SITE,
            task_id=TASK,
            deadline=DEADLINE,
            commitment=payload["commitment"],
        )
        assert report == REPORT
        assert commitment_of(canonical_digest(report), salt) == payload["commitment"]


@pytest.mark.parametrize(
    "changed",
    [{"task_id": "another"}, {"deadline": "2026-12-04T19:00:00.000Z"}, {"task_entry": 8}],
)
def test_a_share_opens_only_for_what_it_was_sealed_for(keypers, changed):
    payload = _sealed(keypers)
    with pytest.raises(SealError):
        _shares(payload, keypers, _context(payload, **changed))


def test_a_share_sealed_to_one_keyper_does_not_open_as_another(keypers):
    payload = _sealed(keypers)
    first = payload["shares"][0]
    with pytest.raises(SealError):
        share_open(
            b64u_decode(first["sealed_share"]),
            keypers[0][1],
            _context(payload),
            keyper=keypers[1][0].name,
            index=first["index"],
        )


def test_a_share_that_disagrees_is_caught(keypers):
    payload = _sealed(keypers)
    shares = _shares(payload, keypers, _context(payload))
    other = Shamir.split(2, 3, bytes(16))[2]
    with pytest.raises(SealError, match="do not agree"):
        key_combine([shares[0], shares[1], other], 2)
    with pytest.raises(SealError, match="2 needed"):
        key_combine(shares[:1], 2)


def test_a_changed_ciphertext_or_commitment_does_not_open(keypers):
    payload = _sealed(keypers)
    key = key_combine(_shares(payload, keypers, _context(payload))[:2], 2)
    ciphertext = bytearray(b64u_decode(payload["ciphertext"]))
    ciphertext[-1] ^= 1
    with pytest.raises(SealError):
        report_open(
            bytes(ciphertext),
            key,
            site=SITE,
            task_id=TASK,
            deadline=DEADLINE,
            commitment=payload["commitment"],
        )
    with pytest.raises(SealError):
        report_open(
            b64u_decode(payload["ciphertext"]),
            key,
            site=SITE,
            task_id=TASK,
            deadline=DEADLINE,
            commitment="sha256:" + "0" * 64,
        )


def test_base64url_is_read_strictly():
    assert b64u_decode(b64u(b"\xff\xfe")) == b"\xff\xfe"
    for text in ("//4", "__4=", "__5"):
        with pytest.raises(ValueError):
            b64u_decode(text)


def test_shares_combine_as_pycryptodomes_shamir_combines_them():
    """SPEC §15.8 names pycryptodome's Shamir; the site combines without it, and must give its
    secret from any shares: split ones, chosen subsets, and bytes from no split at all."""
    rng = random.Random(15_8)
    for _ in range(60):
        threshold = rng.randint(1, 5)
        shares = Shamir.split(threshold, rng.randint(threshold, 7), rng.randbytes(16))
        chosen = rng.sample(shares, threshold)
        arbitrary = [(index, rng.randbytes(16)) for index in rng.sample(range(256), threshold)]
        for given in (chosen, arbitrary):
            assert shamir_combine(given) == Shamir.combine(given)


def test_a_report_jcs_cannot_write_is_not_opened():
    """A report with an integer beyond 2^53 has no canonical form: the opening fails it as a seal
    that does not open (invalid_payload), rather than crashing."""
    plaintext = rfc8785.dumps({"report": {}, "salt": "c2FsdA"}).replace(
        b"{}", b'{"a":9007199254740993}'
    )
    key, nonce = b"\x01" * 16, b"\x02" * 12
    commitment = "sha256:" + "0" * 64
    aad = report_aad(site=SITE, task_id=TASK, deadline=DEADLINE, commitment=commitment)
    ciphertext = nonce + AESGCM(key).encrypt(nonce, plaintext, aad)

    with pytest.raises(SealError, match="cannot be written as canonical JSON"):
        report_open(
            ciphertext, key, site=SITE, task_id=TASK, deadline=DEADLINE, commitment=commitment
        )
