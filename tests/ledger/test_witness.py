"""Cairn as a witness of other logs (SPEC §15.4), through `POST /api/witness/add-checkpoint` of a
live server, by a client written here from the C2SP texts alone: its own log key, its own tree and
consistency proofs (RFC 6962 §2.1, from the definitions), its own check of every cosignature.
Nothing of Cairn's ledger code is used to make or check what goes over the wire."""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.db import connection

from ledger.models import WitnessedLog
from tests.conftest import postgres_only
from tests.deploy.postgres import free_port
from tests.deploy.processes import answering

ROOT = Path(__file__).resolve().parents[2]
ADD = "/api/witness/add-checkpoint"
WITNESS_NAME = "witness.test/w1"


def _raw_public(private: Ed25519PrivateKey) -> bytes:
    return private.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )


def _pem(private: Ed25519PrivateKey) -> str:
    return private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def _key_id(name: str, kind: int, public: bytes) -> bytes:
    """signed-note: SHA-256(name ‖ "\\n" ‖ type ‖ public key)[:4]."""
    return hashlib.sha256(name.encode() + b"\n" + bytes([kind]) + public).digest()[:4]


def _vkey(name: str, kind: int, public: bytes) -> str:
    material = base64.b64encode(bytes([kind]) + public).decode()
    return f"{name}+{_key_id(name, kind, public).hex()}+{material}"


def _h(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


class Log:
    """A transparency log of the test's own (RFC 6962 §2.1, C2SP tlog-checkpoint)."""

    def __init__(self, origin: str, leaves: int = 70) -> None:
        self.origin = origin
        self.key = Ed25519PrivateKey.generate()
        self.leaves = [b"leaf %d of %s" % (n, origin.encode()) for n in range(leaves)]

    @property
    def vkey(self) -> str:
        return _vkey(self.origin, 0x01, _raw_public(self.key))

    def mth(self, data: list[bytes]) -> bytes:
        if not data:
            return _h(b"")
        if len(data) == 1:
            return _h(b"\x00" + data[0])
        k = 1
        while k * 2 < len(data):
            k *= 2
        return _h(b"\x01" + self.mth(data[:k]) + self.mth(data[k:]))

    def root(self, size: int) -> bytes:
        return self.mth(self.leaves[:size])

    def _subproof(self, m: int, data: list[bytes], whole: bool) -> list[bytes]:
        n = len(data)
        if m == n:
            return [] if whole else [self.mth(data)]
        k = 1
        while k * 2 < n:
            k *= 2
        if m <= k:
            return self._subproof(m, data[:k], whole) + [self.mth(data[k:])]
        return self._subproof(m - k, data[k:], False) + [self.mth(data[:k])]

    def proof(self, old: int, new: int) -> list[bytes]:
        """PROOF(m, D[n]) of RFC 6962 §2.1.2; nothing from the empty tree."""
        return [] if old == 0 else self._subproof(old, self.leaves[:new], True)

    def body(self, size: int, root: bytes | None = None) -> str:
        root = self.root(size) if root is None else root
        return f"{self.origin}\n{size}\n{base64.b64encode(root).decode()}\n"

    def signature_line(self, body: str, key: Ed25519PrivateKey | None = None) -> str:
        key = key or self.key
        signed = _key_id(self.origin, 0x01, _raw_public(key)) + key.sign(body.encode())
        return f"\u2014 {self.origin} {base64.b64encode(signed).decode()}\n"

    def checkpoint(self, size: int, root: bytes | None = None) -> str:
        body = self.body(size, root)
        return body + "\n" + self.signature_line(body)

    def submission(
        self,
        old: int,
        size: int,
        *,
        proof: list[bytes] | None = None,
        checkpoint: str | None = None,
    ) -> bytes:
        proof = self.proof(old, size) if proof is None else proof
        lines = "".join(base64.b64encode(h).decode() + "\n" for h in proof)
        return f"old {old}\n{lines}\n{checkpoint or self.checkpoint(size)}".encode()


class Witness:
    """What the client knows of the witness: its name and key, configured out of band."""

    def __init__(self) -> None:
        self.key = Ed25519PrivateKey.generate()
        self.public = _raw_public(self.key)

    @property
    def vkey(self) -> str:
        return _vkey(WITNESS_NAME, 0x04, self.public)

    def verified_time(self, response: httpx.Response, body: str) -> int:
        """tlog-cosignature: `— <name> base64(key ID ‖ u64 time ‖ Ed25519 signature)` over
        "cosignature/v1\\ntime <t>\\n" ‖ the checkpoint's body. Returns the time."""
        assert response.status_code == 200, response.text
        match = re.fullmatch(r"\u2014 (\S+) (\S+)\n", response.text)
        assert match and match[1] == WITNESS_NAME, response.text
        raw = base64.b64decode(match[2], validate=True)
        assert raw[:4] == _key_id(WITNESS_NAME, 0x04, self.public) and len(raw) == 4 + 8 + 64
        timestamp = int.from_bytes(raw[4:12], "big")
        message = f"cosignature/v1\ntime {timestamp}\n{body}".encode()
        self.key.public_key().verify(raw[12:], message)
        assert time.time() - 60 < timestamp <= time.time() + 1
        return timestamp


@pytest.fixture
def witness(settings) -> Witness:
    witness = Witness()
    settings.CAIRN_WITNESS_SIGNING_KEY = _pem(witness.key)
    settings.CAIRN_WITNESS_NAME = WITNESS_NAME
    return witness


@pytest.fixture
def logs(settings, witness) -> tuple[Log, Log]:
    followed = Log("example.test/log-a"), Log("example.test/log-b")
    settings.CAIRN_WITNESSED_LOGS = [log.vkey for log in followed]
    return followed


def _stored(origin: str) -> tuple[int, bytes] | None:
    row = WitnessedLog.objects.filter(origin=origin).first()
    return None if row is None else (row.tree_size, bytes(row.root_hash))


def test_a_growing_log_gets_a_verified_cosignature_for_every_checkpoint(http, witness, logs):
    log = logs[0]
    sizes = [0, 1, 2, 3, 4, 7, 8, 9, 16, 17, 31, 32, 33, 63, 64, 65, 70]
    last = 0
    for size in sizes:
        response = http.post(ADD, content=log.submission(last, size))
        witness.verified_time(response, log.body(size))
        assert response.headers["Content-Type"].startswith("text/plain")
        assert _stored(log.origin) == (size, log.root(size))
        last = size
    # The same checkpoint again (old size = its size, empty proof) is cosigned again.
    witness.verified_time(http.post(ADD, content=log.submission(70, 70)), log.body(70))


def test_a_checkpoint_with_extension_lines_and_other_signatures_is_cosigned_over_its_whole_body(
    http, witness, logs
):
    log = logs[0]
    body = log.body(5) + "extension line\n"
    stranger = Ed25519PrivateKey.generate()
    stranger_line = log.signature_line(body, stranger).replace(log.origin, "other.test/key")
    note = body + "\n" + stranger_line + log.signature_line(body)
    response = http.post(ADD, content=log.submission(0, 5, checkpoint=note))
    witness.verified_time(response, body)


def _assert_refused(response: httpx.Response, status: int, case: str) -> None:
    assert response.status_code == status, (case, response.status_code, response.text)
    assert response.headers["Content-Type"].startswith("text/plain"), case
    assert response.text.endswith("\n") and response.text.count("\n") == 1, (case, response.text)


def test_bad_submissions_get_their_status_and_change_nothing(http, witness, logs, caplog):
    log, fresh = logs
    witness.verified_time(http.post(ADD, content=log.submission(0, 5)), log.body(5))
    valid = log.submission(5, 9)

    boundaries = {i for i, byte in enumerate(valid) if byte == ord("\n")}
    cuts = sorted(
        {0, 1, 3, 5, *range(0, len(valid), 13)} | boundaries | {b + 1 for b in boundaries}
    )
    for cut in cuts:
        if cut < len(valid):
            _assert_refused(http.post(ADD, content=valid[:cut]), 400, f"cut at {cut}")

    stranger = Log("stranger.test/log")
    bad_signature = log.checkpoint(9).replace(log.signature_line(log.body(9)), "")
    signed = log.signature_line(log.body(9))
    flipped = signed[:-6] + ("A" if signed[-6] != "A" else "B") + signed[-5:]
    impostor = log.body(9) + "\n" + log.signature_line(log.body(9), Ed25519PrivateKey.generate())
    changed_proof = [h[::-1] for h in log.proof(5, 9)]
    other_root_5 = log.checkpoint(5, _h(b"another tree of five"))
    cases: list[tuple[str, bytes, int]] = [
        ("unknown origin", stranger.submission(0, 3), 404),
        ("no trusted signature", log.submission(5, 9, checkpoint=impostor), 403),
        ("a trusted signature that fails", valid.replace(signed.encode(), flipped.encode()), 403),
        ("not signed at all", log.submission(5, 9, checkpoint=bad_signature), 400),
        ("a proof that does not verify", log.submission(5, 9, proof=changed_proof), 422),
        ("a proof for other sizes", log.submission(5, 9, proof=log.proof(4, 9)), 422),
        ("from the future", log.submission(12, 9, proof=[]), 400),
        ("the same size, another root", log.submission(5, 5, checkpoint=other_root_5), 422),
        ("64 proof lines", log.submission(5, 9, proof=[_h(b"x")] * 64), 400),
        ("a proof line that is no hash", valid.replace(b"\n", b"\nnot-a-hash\n", 1), 400),
        ("old size with leading zero", valid.replace(b"old 5", b"old 05"), 400),
        ("a size beyond 2^63", valid.replace(b"\n9\n", b"\n9999999999999999999\n"), 400),
        ("not UTF-8", b"old 5\n\xff\xfe\n\n" + log.checkpoint(9).encode(), 400),
        ("CRLF lines", valid.replace(b"\n", b"\r\n"), 400),
        ("padding missing in a signature", valid[: valid.rindex(b"=")] + b"\n", 400),
        ("empty", b"", 400),
        (
            "a fresh log: size 0 with another root",
            fresh.submission(0, 0, checkpoint=fresh.checkpoint(0, _h(b"x"))),
            422,
        ),
        ("a fresh log: a proof from size 0", fresh.submission(0, 3, proof=fresh.proof(1, 3)), 422),
    ]
    caplog.set_level(logging.INFO, logger="http_api.witness")
    for case, body, status in cases:
        _assert_refused(http.post(ADD, content=body), status, case)
    refusals = [r for r in caplog.records if r.name == "http_api.witness"]
    assert refusals and all(r.levelno == logging.INFO and not r.exc_info for r in refusals)

    stale = http.post(ADD, content=log.submission(3, 9))
    assert stale.status_code == 409 and stale.text == "5\n"
    assert stale.headers["Content-Type"] == "text/x.tlog.size"
    not_yet = http.post(ADD, content=fresh.submission(2, 3))
    assert not_yet.status_code == 409 and not_yet.text == "0\n"

    huge = http.post(ADD, content=valid + b"A" * (1024 * 1024))
    assert huge.status_code == 413 and huge.headers["Content-Type"].startswith("text/plain")
    chunked = http.post(ADD, content=iter([valid] + [b"A" * 65536] * 16))
    assert chunked.status_code == 413, chunked.text

    assert _stored(log.origin) == (5, log.root(5))
    assert _stored(fresh.origin) in (None, (0, _h(b"")))
    witness.verified_time(http.post(ADD, content=valid), log.body(9))
    witness.verified_time(http.post(ADD, content=fresh.submission(0, 3)), fresh.body(3))
    assert _stored(log.origin) == (9, log.root(9))


def test_the_door_is_for_servers_not_browsers(http, witness, logs):
    log = logs[0]
    headers = {"Origin": "https://elsewhere.example", "Cookie": "csrftoken=abc"}
    witness.verified_time(
        http.post(ADD, content=log.submission(0, 2), headers=headers), log.body(2)
    )
    wrong_method = http.get(ADD)
    assert wrong_method.status_code == 405 and wrong_method.json()["error"]["code"] == (
        "method_not_allowed"
    )


def test_get_witness_describes_it(http, witness, logs):
    response = http.get("/api/witness")
    assert response.status_code == 200
    assert response.json() == {
        "name": WITNESS_NAME,
        "key": witness.vkey,
        "logs": [log.origin for log in logs],
    }


def test_the_default_name_is_the_site_host(http, witness, settings):
    settings.CAIRN_WITNESS_NAME = ""
    settings.CAIRN_SITE_URL = "https://cairn.example:8443"
    described = http.get("/api/witness").json()
    assert described["name"] == "cairn.example:8443/cairn/witness"
    assert described["key"] == _vkey(described["name"], 0x04, witness.public)


def test_a_log_key_whose_base64_holds_a_plus_is_followed(http, witness, settings):
    log = Log("example.test/plus")
    while "+" not in log.vkey.split("+", 2)[2]:
        log = Log("example.test/plus")
    settings.CAIRN_WITNESSED_LOGS = [log.vkey]
    assert http.get("/api/witness").json()["logs"] == [log.origin]
    witness.verified_time(http.post(ADD, content=log.submission(0, 4)), log.body(4))


def test_without_a_witness_key_both_routes_are_unknown(http, settings):
    settings.CAIRN_WITNESS_SIGNING_KEY = ""
    log = Log("example.test/log-a")
    settings.CAIRN_WITNESSED_LOGS = [log.vkey]
    for response in (http.get("/api/witness"), http.post(ADD, content=log.submission(0, 1))):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    assert not WitnessedLog.objects.exists()


def _database_url() -> str:
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def witness_processes(transactional_db, witness, logs, tmp_path) -> Iterator[list[str]]:
    """Two `python -m cairn.serve` processes witnessing on the test's PostgreSQL database."""
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "DEBUG": "false",
        "ALLOWED_HOSTS": "127.0.0.1",
        "CAIRN_WITNESS_SIGNING_KEY": _pem(witness.key),
        "CAIRN_WITNESS_NAME": WITNESS_NAME,
        "CAIRN_WITNESSED_LOGS": "\n".join(log.vkey for log in logs),
    }
    processes, urls = [], []
    for n in range(2):
        port = free_port()
        with open(tmp_path / f"web-{n}.log", "wb") as out:
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-m", "cairn.serve", "--port", str(port)],
                    cwd=ROOT,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
        urls.append(f"http://127.0.0.1:{port}")
    try:
        for n, (url, process) in enumerate(zip(urls, processes, strict=True)):
            answering(url, process, seconds=30, log=(tmp_path / f"web-{n}.log").read_text)
        yield urls
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=20)


@postgres_only()
def test_two_processes_racing_from_the_same_old_size_advance_it_once(
    witness_processes, witness, logs
):
    log = logs[0]
    clients = [httpx.Client(base_url=url, timeout=20) for url in witness_processes]
    witness.verified_time(clients[0].post(ADD, content=log.submission(0, 2)), log.body(2))
    size = 2
    for _ in range(20):
        bodies = [log.submission(size, size + 1), log.submission(size, size + 2)]
        answers: list[httpx.Response | None] = [None, None]
        start = threading.Barrier(2)

        def submit(lane: int, bodies: list[bytes] = bodies, answers=answers, start=start) -> None:
            start.wait()
            answers[lane] = clients[lane].post(ADD, content=bodies[lane])

        threads = [threading.Thread(target=submit, args=(lane,)) for lane in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        statuses = [answer.status_code for answer in answers]
        assert sorted(statuses) == [200, 409], [a.text for a in answers]
        winner = statuses.index(200)
        new_size = size + 1 + winner
        witness.verified_time(answers[winner], log.body(new_size))
        assert answers[1 - winner].text == f"{new_size}\n"
        assert _stored(log.origin) == (new_size, log.root(new_size))
        size = new_size
    for client in clients:
        client.close()
