"""RFC 9162 §2.1 Merkle tree hashing and proofs, as folds of stored perfect subtrees (`Node`):
these functions name the nodes a root or proof needs and fold them; the caller reads the rows."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

NodeKey = tuple[int, int]  # (level, index): leaves [index·2^level, (index+1)·2^level)
Range = tuple[int, int]  # leaves [start, end)

EMPTY_ROOT = hashlib.sha256(b"").digest()


def leaf_hash(entry: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(size: int) -> int:
    """The largest power of two smaller than `size` (size ≥ 2): where the RFC splits a tree."""
    return 1 << ((size - 1).bit_length() - 1)


def perfect_nodes(start: int, end: int) -> list[NodeKey]:
    """The perfect subtrees that make up MTH(D[start:end]), left to right. `start` is aligned as
    in every range the RFC's recursion produces."""
    keys = []
    while start < end:
        level = (end - start).bit_length() - 1
        keys.append((level, start >> level))
        start += 1 << level
    return keys


def range_hash(start: int, end: int, nodes: Mapping[NodeKey, bytes]) -> bytes:
    """MTH(D[start:end]) from the stored perfect subtrees."""
    if start == end:
        return EMPTY_ROOT
    hashes = [nodes[key] for key in perfect_nodes(start, end)]
    result = hashes[-1]
    for left in reversed(hashes[:-1]):
        result = node_hash(left, result)
    return result


def inclusion_ranges(index: int, size: int) -> list[Range]:
    """PATH(index, D[0:size]) of RFC 9162 §2.1.3.1, as ranges, leaf side first."""
    ranges = []
    start, end, m = 0, size, index
    while end - start > 1:
        k = _split(end - start)
        if m < k:
            ranges.append((start + k, end))
            end = start + k
        else:
            ranges.append((start, start + k))
            start, m = start + k, m - k
    return ranges[::-1]


def consistency_ranges(first: int, second: int) -> list[Range]:
    """PROOF(first, D[0:second]) of RFC 9162 §2.1.4.1, as ranges; empty when `first` is 0 (every
    tree extends the empty one) or equals `second`."""
    if first == 0:
        return []
    ranges = []
    start, end, m, whole = 0, second, first, True
    while m != end - start:
        k = _split(end - start)
        if m <= k:
            ranges.append((start + k, end))
            end = start + k
        else:
            ranges.append((start, start + k))
            start, m, whole = start + k, m - k, False
    if not whole:
        ranges.append((start, end))
    return ranges[::-1]


def nodes_for(ranges: Iterable[Range]) -> set[NodeKey]:
    return {key for start, end in ranges for key in perfect_nodes(start, end)}


def parents_closed_by(
    index: int, leaf: bytes, nodes: Mapping[NodeKey, bytes]
) -> list[tuple[NodeKey, bytes]]:
    """The nodes that appending leaf number `index` completes, itself first. Each needs its left
    sibling, a perfect subtree already in `nodes` (the log's right frontier)."""
    closed = [((0, index), leaf)]
    level, position, current = 0, index, leaf
    while position % 2 == 1:
        current = node_hash(nodes[(level, position - 1)], current)
        level, position = level + 1, position // 2
        closed.append(((level, position), current))
    return closed


def _path_folded(fn: int, sn: int, seed: bytes, path: list[bytes]) -> tuple[bytes, bytes] | None:
    """RFC 9162's verification loop: `seed` hashed up `path` from node `fn` of a tree whose last
    node is `sn`, as `fr` (left siblings only) and `sr` (all); None unless it ends at the root."""
    fr = sr = seed
    for c in path:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while fn and not fn & 1:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return (fr, sr) if sn == 0 else None


def consistency_verify(
    first: int, second: int, first_root: bytes, second_root: bytes, proof: list[bytes]
) -> bool:
    """RFC 9162 §2.1.4.2, for sizes a witness is handed. Every tree extends the empty one, with
    an empty proof; a tree is consistent with itself only with an empty proof and the same root."""
    if first > second:
        return False
    if first == second:
        return not proof and first_root == second_root
    if first == 0:
        return not proof
    if not proof:
        return False
    path = [first_root, *proof] if first & (first - 1) == 0 else list(proof)
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    return _path_folded(fn, sn, path[0], path[1:]) == (first_root, second_root)


def inclusion_verify(index: int, size: int, leaf: bytes, proof: list[bytes], root: bytes) -> bool:
    """RFC 9162 §2.1.3.2, for proofs a keyper is handed (§15.8)."""
    folded = _path_folded(index, size - 1, leaf, proof) if index < size else None
    return folded is not None and folded[1] == root
