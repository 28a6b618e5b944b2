"""SPEC §15.3: the log as C2SP tlog-tiles, read by a client written from that spec alone.

The client knows the spec's paths and hashing and the site's JWKS, nothing of Cairn's code: it
checks the checkpoint's signature, reads every entry bundle and tile a monitor needs, and rebuilds
the signed root from them.
"""

from __future__ import annotations

import base64
import hashlib

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ledger.logs import log_first
from ledger.selectors import entry_bundle, hash_tile
from ledger.services import log_queue, log_sequence

IMMUTABLE = "public, max-age=31536000, immutable"


def leaf_hash(entry: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def mth(hashes: list[bytes]) -> bytes:
    """RFC 6962's MTH over already hashed leaves, from its definition."""
    if not hashes:
        return hashlib.sha256(b"").digest()
    if len(hashes) == 1:
        return hashes[0]
    k = 1 << ((len(hashes) - 1).bit_length() - 1)
    return node_hash(mth(hashes[:k]), mth(hashes[k:]))


def tile_path(level: int | str, n: int, width: int = 256) -> str:
    """`/tile/<L>/<N>[.p/<W>]`: N in 3-digit elements, all but the last prefixed with x."""
    elements = [f"{n % 1000:03d}"]
    while n >= 1000:
        n //= 1000
        elements.insert(0, f"x{n % 1000:03d}")
    suffix = "" if width == 256 else f".p/{width}"
    return f"/api/log/tile/{level}/{'/'.join(elements)}{suffix}"


def signed_checkpoint(http: httpx.Client) -> tuple[int, bytes]:
    """(tree size, root) of the served checkpoint, once its Ed25519 note signature by the key of
    the site's JWKS checks."""
    body, _, signatures = http.get("/api/log/checkpoint").text.partition("\n\n")
    origin, size, root = body.split("\n")
    (key,) = http.get("/.well-known/jwks.json").json()["keys"]
    public = base64.urlsafe_b64decode(key["x"] + "=")
    key_id = hashlib.sha256(origin.encode() + b"\n\x01" + public).digest()[:4]
    for line in signatures.splitlines():
        _, name, stamp = line.split(" ")
        raw = base64.b64decode(stamp)
        if name == origin and raw[:4] == key_id:
            Ed25519PublicKey.from_public_bytes(public).verify(raw[4:], (body + "\n").encode())
            return int(size), base64.b64decode(root)
    raise AssertionError("the checkpoint carries no signature by the site key")


def fetched(http: httpx.Client, path: str) -> bytes:
    """A tile's bytes; a full one cached for good, a partial one, which may go, briefly."""
    response = http.get(path)
    assert response.status_code == 200, (path, response.text)
    assert response.headers["content-type"] == "application/octet-stream"
    cache = response.headers["cache-control"]
    assert (".p/" in path) == ("immutable" not in cache), (path, cache)
    assert ".p/" in path or cache == IMMUTABLE
    return response.content


def bundle_entries(data: bytes) -> list[bytes]:
    entries = []
    while data:
        length = int.from_bytes(data[:2], "big")
        entries.append(data[2 : 2 + length])
        data = data[2 + length :]
    return entries


def read_log(http: httpx.Client) -> list[bytes]:
    """Every entry under the signed checkpoint, as a monitor reads them: each entry bundle checked
    against its level-0 tile, each full tile against its hash one level up, and the root rebuilt
    from the partial tiles. Returns the entries."""
    size, root = signed_checkpoint(http)
    entries: list[bytes] = []
    level_hashes: list[bytes] = []  # the hashes of the level being read, left to right
    for n in range(-(-size // 256)):
        width = min(256, size - n * 256)
        bundle = bundle_entries(fetched(http, tile_path("entries", n, width)))
        tile = fetched(http, tile_path(0, n, width))
        assert len(bundle) == width and len(tile) == 32 * width
        assert b"".join(leaf_hash(entry) for entry in bundle) == tile
        entries += bundle
        level_hashes += [tile[i : i + 32] for i in range(0, len(tile), 32)]

    level, per = 0, 1  # per: leaves under one hash of this level
    while size // (per * 256):
        count = size // (per * 256)  # hashes of the level above
        above: list[bytes] = []
        for n in range(-(-count // 256)):
            width = min(256, count - n * 256)
            above += [
                hashes[i : i + 32]
                for hashes in [fetched(http, tile_path(level + 1, n, width))]
                for i in range(0, len(hashes), 32)
            ]
        for i, parent in enumerate(above):
            assert mth(level_hashes[i * 256 : (i + 1) * 256]) == parent, (level + 1, i)
        level_hashes, level, per = above, level + 1, per * 256

    assert rebuilt_root(http, size) == root
    return entries


def rebuilt_root(http: httpx.Client, size: int) -> bytes:
    """The tree's root from the partial tiles only: each perfect subtree of the size's binary
    decomposition, 2^(8L+r) leaves, is the MTH of 2^r consecutive hashes of the level-L partial
    tile."""
    subtrees: list[bytes] = []
    start = 0
    for k in reversed(range(size.bit_length())):
        if not size >> k & 1:
            continue
        level, r = divmod(k, 8)
        per = 256**level
        width = size // per % 256
        tile = fetched(http, tile_path(level, size // (per * 256), width))
        first = start // per % 256
        subtrees.append(mth([tile[32 * i : 32 * i + 32] for i in range(first, first + 2**r)]))
        start += 1 << k
    root = subtrees[-1] if subtrees else hashlib.sha256(b"").digest()
    for left in reversed(subtrees[:-1]):
        root = node_hash(left, root)
    return root


def grow_to(size: int, current: int = 0) -> None:
    log_queue({"type": "test", "n": n} for n in range(current, size))
    log_sequence()


def test_every_tile_of_a_growing_log_rebuilds_its_signed_root(db, http):
    seen: dict[int, list[bytes]] = {}
    current = 0
    for size in (0, 1, 255, 256, 257, 513):
        grow_to(size, current)
        current = size
        entries = read_log(http)
        assert signed_checkpoint(http)[0] == size
        assert entries == [b'{"n":%d,"type":"test"}' % n for n in range(size)]
        seen[size] = entries

    # Every partial tile an earlier checkpoint needed is still served, and still a prefix.
    for size in (1, 255, 257):
        assert fetched(http, tile_path(0, size // 256, size % 256))
        assert rebuilt_root(http, size) == mth([leaf_hash(e) for e in seen[size]])
    full = fetched(http, tile_path(0, 0))
    assert fetched(http, tile_path(0, 0, 255)) == full[: 32 * 255]


def test_a_log_of_over_65536_entries_is_read_whole_from_its_tiles(db, http):
    """The spec's own example: 70,000 entries are 273 full level-0 tiles, a partial one of 112,
    a full level-1 tile, a partial one of 17 and a partial level-2 tile of 1."""
    log_queue({"type": "test", "n": n} for n in range(70_000))
    log_sequence(batch_size=10_000)

    assert len(read_log(http)) == 70_000
    assert len(http.get(tile_path(0, 273, 112)).content) == 112 * 32
    assert len(http.get(tile_path(1, 0)).content) == 256 * 32
    assert len(http.get(tile_path(1, 1, 17)).content) == 17 * 32
    assert len(http.get(tile_path(2, 0, 1)).content) == 32


def test_tiles_the_latest_checkpoint_does_not_hold_are_not_found(db, http):
    grow_to(257)
    log_queue([{"type": "test", "n": 257}])  # queued, not yet in the tree

    for path in (
        tile_path(0, 1, 2),  # one hash more than the checkpoint's tree has
        tile_path(0, 1),
        tile_path(0, 2, 1),
        tile_path("entries", 1, 2),
        tile_path("entries", 1),
        tile_path(1, 0),  # 256 level-0 tiles are not complete
        tile_path(1, 0, 2),
        tile_path(2, 0, 1),
        tile_path(63, 10**30, 1),
    ):
        response = http.get(path)
        assert (response.status_code, response.json()["error"]["code"]) == (404, "not_found")
        assert response.headers["cache-control"] == "no-store", path


@pytest.mark.parametrize(
    "path",
    [
        "0/1",
        "0/0001",
        "0/x000/001",  # 1 has one encoding: 001
        "0/x001",
        "00/000",
        "01/000",
        "64/000",
        "-1/000",
        "a/000",
        "0/000/",
        "0/000.p",
        "0/000.p/",
        "0/000.p/0",
        "0/000.p/007",
        "0/000.p/256",
        "entries/000.p/300",
        "entries",
        "entries/x000/001",
        "data/000",
        "0/000.p/1/extra",
    ],
)
def test_malformed_tile_paths_are_invalid_query(db, http, path):
    grow_to(3)

    response = http.get(f"/api/log/tile/{path}")

    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_query"
    assert response.headers["cache-control"] == "no-store"


def test_a_tile_takes_no_query_and_is_bytes_whatever_the_client_accepts(db, http):
    grow_to(3)

    queried = http.get(tile_path(0, 0, 3), params={"v": 1})
    accepting = http.get(tile_path(0, 0, 3), headers={"Accept": "application/octet-stream"})

    assert (queried.status_code, queried.json()["error"]["code"]) == (400, "invalid_query")
    assert accepting.status_code == 200
    assert accepting.content == b"".join(leaf_hash(b'{"n":%d,"type":"test"}' % n) for n in range(3))


def test_a_huge_tile_index_is_not_found_not_an_error(db, http):
    grow_to(3)

    response = http.get("/api/log/tile/0/" + "x999/" * 500 + "999.p/1")

    assert (response.status_code, response.json()["error"]["code"]) == (404, "not_found")


def test_a_tile_costs_the_same_two_queries_at_any_level(db):
    log_queue({"type": "test", "n": n} for n in range(600))
    log_sequence()

    for read in (
        lambda: hash_tile(level=0, index=1, width=256, log=log_first()),
        lambda: hash_tile(level=1, index=0, width=2, log=log_first()),
        lambda: entry_bundle(index=2, width=88, log=log_first()),
    ):
        with CaptureQueriesContext(connection) as queries:
            tile = read()
        assert len(queries) == 2 and tile
