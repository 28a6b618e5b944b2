"""A witness written from the C2SP texts alone (`tlog-witness`, `tlog-cosignature`, `signed-note`,
`tlog-checkpoint`, RFC 6962 §2.1.2), to test Cairn against something that is not Cairn.

It imports nothing of Cairn's: its own note parsing, its own Ed25519 signing and key IDs, its
own consistency-proof check. It follows one log, keeps that log's latest cosigned size and root
in a JSON state file (so a restarted witness remembers), and answers `POST /add-checkpoint`.

    python tests/ledger/spec_witness.py --name witness.test/w1 --seed <64 hex> \\
        --log-key <the log's verifier key> --state <file> [--port N] [--stall S]

It prints `<port> <its verifier key>` on one line once it listens. `--stall S` makes it sleep S
seconds before handling its first submission (a witness that is slow to answer).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

EM_DASH = "\u2014"
LOG_SIGNATURE_TYPE = 0x01  # signed-note: Ed25519
COSIGNATURE_TYPE = 0x04  # tlog-cosignature: timestamped Ed25519


class Refused(Exception):
    def __init__(self, status: int, message: str, content_type: str = "text/plain") -> None:
        super().__init__(message)
        self.status = status
        self.content_type = content_type


def key_id(name: str, signature_type: int, public: bytes) -> bytes:
    """signed-note: SHA-256(key name || 0x0A || signature type || public key)[:4]."""
    return hashlib.sha256(name.encode() + b"\n" + bytes([signature_type]) + public).digest()[:4]


def vkey(name: str, signature_type: int, public: bytes) -> str:
    material = base64.b64encode(bytes([signature_type]) + public).decode()
    return f"{name}+{key_id(name, signature_type, public).hex()}+{material}"


def vkey_parse(text: str) -> tuple[str, bytes, bytes]:
    """A log's verifier key: (name, key ID, Ed25519 public key)."""
    name, id_hex, material = text.split("+", 2)
    raw = base64.b64decode(material)
    assert raw[0] == LOG_SIGNATURE_TYPE and len(raw) == 33, "the log key must be Ed25519"
    assert key_id(name, raw[0], raw[1:]) == bytes.fromhex(id_hex), "the log key's ID is wrong"
    return name, bytes.fromhex(id_hex), raw[1:]


def hash_children(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def consistency_verifies(
    first: int, second: int, first_hash: bytes, second_hash: bytes, proof: list[bytes]
) -> bool:
    """RFC 9162 §2.1.4.2, the consistency proof check for 0 < first < second."""
    if not proof:
        return False
    if first & (first - 1) == 0:  # an exact power of 2
        proof = [first_hash, *proof]
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = proof[0]
    for c in proof[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = hash_children(c, fr)
            sr = hash_children(c, sr)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = hash_children(sr, c)
        fn >>= 1
        sn >>= 1
    return fr == first_hash and sr == second_hash and sn == 0


def split_request(body: str) -> tuple[int, list[bytes], str]:
    """The old size, the proof hashes and the checkpoint note of an add-checkpoint body."""
    head, separator, note = body.partition("\n\n")
    if not separator:
        raise Refused(400, "no blank line after the proof")
    lines = head.split("\n")
    old_line, proof_lines = lines[0], lines[1:]
    if not old_line.startswith("old "):
        raise Refused(400, "the first line is not `old <size>`")
    size_text = old_line[4:]
    if not size_text.isdigit() or (size_text != "0" and size_text.startswith("0")):
        raise Refused(400, "the old size is not a decimal")
    if len(proof_lines) > 63:
        raise Refused(400, "more than 63 proof lines")
    try:
        proof = [base64.b64decode(line, validate=True) for line in proof_lines]
    except binascii.Error:
        raise Refused(400, "a proof line is not base64") from None
    if any(len(h) != 32 for h in proof):
        raise Refused(400, "a proof hash is not 32 bytes")
    return int(size_text), proof, note


def split_note(note: str) -> tuple[str, list[tuple[str, bytes]]]:
    """The note text (with its final newline) and its signatures as (key name, decoded bytes);
    the text is separated from the signatures by the last empty line."""
    if not note.endswith("\n"):
        raise Refused(400, "the note does not end with a newline")
    cut = note.rfind("\n\n")
    if cut < 0:
        raise Refused(400, "the note has no blank line before its signatures")
    text, signature_block = note[: cut + 1], note[cut + 2 :]
    signatures = []
    for line in signature_block.rstrip("\n").split("\n"):
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] != EM_DASH:
            raise Refused(400, "a signature line is malformed")
        try:
            signatures.append((parts[1], base64.b64decode(parts[2], validate=True)))
        except binascii.Error:
            raise Refused(400, "a signature is not base64") from None
    return text, signatures


def cosigned_at(note: str, witness_key: str) -> int:
    """A reader's check: the time of the witness's cosignature on the note, once it verifies."""
    name, id_hex, material = witness_key.split("+", 2)
    raw = base64.b64decode(material)
    assert raw[0] == COSIGNATURE_TYPE and key_id(name, raw[0], raw[1:]).hex() == id_hex
    text, signatures = split_note(note)
    for signer, signature in signatures:
        if signer == name and signature[:4].hex() == id_hex:
            timestamp = int.from_bytes(signature[4:12], "big")
            message = f"cosignature/v1\ntime {timestamp}\n{text}".encode()
            Ed25519PublicKey.from_public_bytes(raw[1:]).verify(signature[12:], message)
            return timestamp
    raise LookupError(f"no cosignature by {name}")


def log_signed(note: str, log_key: str) -> tuple[int, bytes]:
    """A reader's check: the tree size and root of a checkpoint, once the log's signature verifies."""
    name, key, public = vkey_parse(log_key)
    text, signatures = split_note(note)
    (signature,) = [s for n, s in signatures if n == name and s[:4] == key]
    Ed25519PublicKey.from_public_bytes(public).verify(signature[4:], text.encode())
    origin, size, root = text.split("\n")[:3]
    return int(size), base64.b64decode(root)


class Witness:
    def __init__(
        self, name: str, seed: bytes, log_keys: list[str], state: Path, stall: float = 0.0
    ) -> None:
        self.name = name
        self.private = Ed25519PrivateKey.from_private_bytes(seed)
        self.public = self.private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self.key_id = key_id(name, COSIGNATURE_TYPE, self.public)
        self.logs = {name: (kid, public) for name, kid, public in map(vkey_parse, log_keys)}
        self.state = state
        self.stall = stall
        self.lock = threading.Lock()
        self.first_request = threading.Lock()

    @property
    def vkey(self) -> str:
        return vkey(self.name, COSIGNATURE_TYPE, self.public)

    def _load(self) -> dict[str, dict[str, object]]:
        return json.loads(self.state.read_text()) if self.state.exists() else {}

    def _save(self, logs: dict[str, dict[str, object]]) -> None:
        temporary = self.state.with_suffix(".tmp")
        temporary.write_text(json.dumps(logs))
        os.replace(temporary, self.state)

    def add_checkpoint(self, body: str) -> str:
        if self.stall and self.first_request.acquire(blocking=False):
            time.sleep(self.stall)
        old, proof, note = split_request(body)
        text, signatures = split_note(note)
        lines = text.split("\n")
        if len(lines) < 4:
            raise Refused(400, "the checkpoint has fewer than three lines")
        origin, size_text, root_text = lines[0], lines[1], lines[2]
        if origin not in self.logs:
            raise Refused(404, f"unknown log {origin!r}")
        log_key_id, log_public = self.logs[origin]
        verified = False
        for name, raw in signatures:
            if name == origin and raw[:4] == log_key_id:
                try:
                    Ed25519PublicKey.from_public_bytes(log_public).verify(raw[4:], text.encode())
                except InvalidSignature:
                    raise Refused(403, "the log's signature does not verify") from None
                verified = True
        if not verified:
            raise Refused(403, "no signature by the log's key")
        if not size_text.isdigit():
            raise Refused(400, "the tree size is not a decimal")
        size = int(size_text)
        root = base64.b64decode(root_text)
        if old > size:
            raise Refused(400, "the old size is larger than the checkpoint's")
        with self.lock:  # checking the old size and keeping the new one are one step
            logs = self._load()
            known = logs.get(origin, {"size": 0, "root": ""})
            known_size = int(str(known["size"]))
            if old != known_size:
                raise Refused(409, f"{known_size}\n", "text/x.tlog.size")
            if size == 0 and root != hashlib.sha256(b"").digest():
                raise Refused(422, "a tree of size zero must have the empty root")
            if old == 0 and proof:
                raise Refused(422, "no proof is due from size zero")
            known_root = base64.b64decode(str(known["root"]))
            if old == size and proof:
                raise Refused(422, "no proof is due between equal sizes")
            if old == size:
                if old and root != known_root:
                    raise Refused(422, "a different root for the same tree size")
            elif old and not consistency_verifies(old, size, known_root, root, proof):
                raise Refused(422, "the consistency proof does not verify")
            logs[origin] = {"size": size, "root": root_text}
            self._save(logs)
        timestamp = int(time.time())
        message = f"cosignature/v1\ntime {timestamp}\n{text}".encode()
        signature = timestamp.to_bytes(8, "big") + self.private.sign(message)
        return f"{EM_DASH} {self.name} {base64.b64encode(self.key_id + signature).decode()}\n"


def handler_for(witness: Witness) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            if self.path != "/add-checkpoint":
                self._answer(404, "not found\n")
                return
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = self.rfile.read(length).decode("utf-8")
                self._answer(200, witness.add_checkpoint(body))
            except UnicodeDecodeError:
                self._answer(400, "not UTF-8\n")
            except Refused as refused:
                self._answer(refused.status, str(refused), refused.content_type)

        def _answer(self, status: int, text: str, content_type: str = "text/plain") -> None:
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--seed", required=True, help="the Ed25519 private key, 64 hex")
    parser.add_argument("--log-key", required=True, action="append", help="once per log followed")
    parser.add_argument("--state", required=True, type=Path)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--stall", type=float, default=0.0)
    args = parser.parse_args()
    witness = Witness(args.name, bytes.fromhex(args.seed), args.log_key, args.state, args.stall)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler_for(witness))
    server.daemon_threads = True
    print(server.server_address[1], witness.vkey, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
