"""A monitor's read of the whole log through its tiles (SPEC §15.3, issue 27): how long a client
takes to fetch every entry bundle of a 100,000-entry log from a live Cairn and rebuild the root.

    PYTHONPATH=. taskset -c 1 .venv/bin/python bench/tiles_read.py [entries]

Makes `cairn_bench_tiles` on the benchmark's PostgreSQL (`bench/run.sh pg-start`'s cluster, or
`BENCH_PG`) once per size, filled through the log's own queue and sequencer with contribution-like
entries, then serves it with Cairn under uvicorn pinned to core 0 and reads it from this process
as a monitor would, knowing only the tlog-tiles paths, RFC 6962 hashing and the site's JWKS:
verify the checkpoint's signature, fetch each entry bundle in order on one connection, hash
every entry, fold the root and compare it with the signed one.
"""

from __future__ import annotations

import base64
import hashlib
import os
import sys
import time
import uuid

import httpx
import psycopg

from bench import (  # bench/bench.py, beside this file
    CAIRN_PORT,
    PY,
    cairn_env,
    cairn_server,
    db_exists,
    log,
    pg_start,
    pg_url,
    recreate_db,
    run,
)

DB = "cairn_bench_tiles"


def checkpointed_size() -> int:
    with psycopg.connect(pg_url(DB)) as conn:
        row = conn.execute("SELECT max(tree_size) FROM ledger_checkpoint").fetchone()
    return row[0] or 0


def fill(entries: int) -> None:
    """A fresh database whose log holds `entries` entries under a signed checkpoint, written the
    way the writes and the sequencer write them."""
    recreate_db(DB)
    env = cairn_env(pg_url(DB))
    run([PY, "manage.py", "migrate", "--noinput", "-v0"], env=env)
    os.environ.update(env)
    import django

    django.setup()
    from django.db import transaction

    from ledger.services import log_queue, log_sequence

    started = time.perf_counter()
    for first in range(0, entries, 10_000):
        with transaction.atomic():
            log_queue(
                {
                    "type": "cairn.log/contribution",
                    "task_id": str(uuid.uuid4()),
                    "contribution_id": str(uuid.uuid4()),
                    "commitment": "sha256:" + hashlib.sha256(b"%d" % n).hexdigest(),
                    "received_at": "2026-12-03T10:00:00.000Z",
                }
                for n in range(first, min(entries, first + 10_000))
            )
    queued = time.perf_counter()
    log_sequence()
    log(
        f"queued {entries:,} entries in {queued - started:.1f} s, "
        f"sequenced them in {time.perf_counter() - queued:.1f} s"
    )


def tile_path(level: int | str, n: int, width: int) -> str:
    elements = [f"{n % 1000:03d}"]
    while n >= 1000:
        n //= 1000
        elements.insert(0, f"x{n % 1000:03d}")
    return f"/api/log/tile/{level}/{'/'.join(elements)}" + ("" if width == 256 else f".p/{width}")


def signed_checkpoint(client: httpx.Client) -> tuple[int, bytes]:
    body, _, signatures = client.get("/api/log/checkpoint").text.partition("\n\n")
    origin, size, root = body.split("\n")
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    (key,) = client.get("/.well-known/jwks.json").json()["keys"]
    public = base64.urlsafe_b64decode(key["x"] + "=")
    key_id = hashlib.sha256(origin.encode() + b"\n\x01" + public).digest()[:4]
    for line in signatures.splitlines():
        _, name, stamp = line.split(" ")
        raw = base64.b64decode(stamp)
        if name == origin and raw[:4] == key_id:
            Ed25519PublicKey.from_public_bytes(public).verify(raw[4:], (body + "\n").encode())
            return int(size), base64.b64decode(root)
    raise SystemExit("the checkpoint carries no signature by the site key")


class Root:
    """RFC 6962's MTH folded as leaves stream in: a stack of perfect subtrees, merged while the
    two on top are the same size."""

    def __init__(self) -> None:
        self.stack: list[tuple[int, bytes]] = []

    def add(self, entry: bytes) -> None:
        node = (1, hashlib.sha256(b"\x00" + entry).digest())
        while self.stack and self.stack[-1][0] == node[0]:
            size, left = self.stack.pop()
            node = (2 * size, hashlib.sha256(b"\x01" + left + node[1]).digest())
        self.stack.append(node)

    def root(self) -> bytes:
        if not self.stack:
            return hashlib.sha256(b"").digest()
        result = self.stack[-1][1]
        for _, left in reversed(self.stack[:-1]):
            result = hashlib.sha256(b"\x01" + left + result).digest()
        return result


def monitor(base_url: str) -> tuple[int, int, int]:
    """(entries, bundles, bytes) read; exits unless the rebuilt root is the signed one."""
    with httpx.Client(base_url=base_url, timeout=30) as client:
        size, signed_root = signed_checkpoint(client)
        tree, fetched = Root(), 0
        for n in range(-(-size // 256)):
            width = min(256, size - n * 256)
            response = client.get(tile_path("entries", n, width))
            response.raise_for_status()
            data, count = response.content, 0
            fetched += len(data)
            while data:
                length = int.from_bytes(data[:2], "big")
                tree.add(data[2 : 2 + length])
                data, count = data[2 + length :], count + 1
            if count != width:
                raise SystemExit(f"bundle {n} holds {count} entries, not {width}")
    if tree.root() != signed_root:
        raise SystemExit("the root rebuilt from the entry bundles is not the signed one")
    return size, -(-size // 256), fetched


def main() -> None:
    entries = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    pg_start()
    if not db_exists(DB) or checkpointed_size() != entries:
        fill(entries)
    with cairn_server("uvicorn", pg_url(DB), "cairn.settings"):
        started = time.perf_counter()
        size, bundles, fetched = monitor(f"http://127.0.0.1:{CAIRN_PORT}")
        seconds = time.perf_counter() - started
    log(
        f"read {size:,} entries in {bundles} entry bundles ({fetched / 1e6:.1f} MB) and rebuilt "
        f"the signed root in {seconds:.2f} s ({size / seconds:,.0f} entries/s)"
    )


if __name__ == "__main__":
    main()
