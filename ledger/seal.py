"""Sealed at rest (SPEC §15.6): a report is stored only encrypted until its task is evaluated, by
AES-256-GCM under `CAIRN_SEAL_KEY` with a fresh 96-bit nonce, and with the task and contribution ids
as associated data, so a sealed report moved onto another row does not open."""

from __future__ import annotations

import json
import os
import uuid
from functools import lru_cache
from typing import Any

import orjson
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings

NONCE_BYTES = 12


def _associated_data(task_id: uuid.UUID, contribution_id: uuid.UUID) -> bytes:
    return f"cairn.report/{task_id}/{contribution_id}".encode()


def report_seal(report: Any, *, task_id: uuid.UUID, contribution_id: uuid.UUID) -> bytes:
    """`nonce ‖ ciphertext ‖ tag` of the report's JSON text (it is opened to the same value)."""
    nonce = os.urandom(NONCE_BYTES)
    text = json.dumps(report, ensure_ascii=False).encode()
    return nonce + _cipher(settings.CAIRN_SEAL_KEY).encrypt(
        nonce, text, _associated_data(task_id, contribution_id)
    )


def report_open(sealed: bytes, *, task_id: uuid.UUID, contribution_id: uuid.UUID) -> Any:
    """The report; `cryptography.exceptions.InvalidTag` when the bytes, key or ids are not its own."""
    sealed = bytes(sealed)
    text = _cipher(settings.CAIRN_SEAL_KEY).decrypt(
        sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], _associated_data(task_id, contribution_id)
    )
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:  # what `json.dumps` writes and orjson does not read: 2**70
        return json.loads(text)


@lru_cache(maxsize=4)
def _cipher(key: bytes) -> AESGCM:
    """The key's cipher, made once: the sweep opens thousands of reports under one key."""
    return AESGCM(key)
