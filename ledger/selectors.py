"""Reads of the log (SPEC §15.3), also as C2SP `tlog-tiles`; proofs and tiles only of trees a signed
checkpoint names, so every partial tile a checkpoint needed stays and a full one never changes. A
level-L tile's hashes are the `Node`s at tree level 8·L, so each tile is one range query."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from core.errors import ErrorCode, Refusal, invalid_query
from ledger.logs import LogRef
from ledger.merkle import consistency_ranges, inclusion_ranges
from ledger.models import Checkpoint, Leaf, Node, QueuedEntry
from ledger.services import checkpoint_latest, range_hashes
from ledger.witnesses import checkpoint_quorate_latest, checkpoints_quorate

MAX_ENTRIES = 1000
TILE_HEIGHT = 8
TILE_WIDTH = 1 << TILE_HEIGHT
MAX_LEVEL = 63


def checkpoints_covering(*, index: int, log: LogRef) -> list[Checkpoint]:
    """The earliest quorate checkpoint holding entry `index`, then the latest quorate one (once
    when they are the same)."""
    earliest = (
        checkpoints_quorate(log).filter(tree_size__gt=index).order_by("tree_size", "id").first()
    )
    if earliest is None:
        raise Refusal(
            ErrorCode.NOT_FOUND,
            f"no checkpoint carrying the witness quorum holds entry {index} yet",
        )
    latest = checkpoint_quorate_latest(log)
    return [earliest] if latest is None or latest.pk == earliest.pk else [earliest, latest]


def checkpointed_size(log: LogRef) -> int:
    latest = checkpoint_latest(log)
    return 0 if latest is None else latest.tree_size


def _leaves(log: LogRef, start: int, end: int) -> QuerySet[Leaf]:
    """The leaves [start, end) of `log`, counted from its first."""
    return Leaf.objects.filter(index__gte=log.start + start, index__lt=log.start + end)


def entries_range(*, start: int, end: int, log: LogRef) -> list[dict[str, Any]]:
    end = min(end, checkpointed_size(log), start + MAX_ENTRIES)
    return [_served(log, leaf) for leaf in _leaves(log, start, end).order_by("index")]


def _served(log: LogRef, leaf: Leaf) -> dict[str, Any]:
    return {
        "index": leaf.index - log.start,
        "leaf_hash": leaf.leaf_hash,
        "entry": json.loads(leaf.entry),
    }


def entries_of_task(task_id: uuid.UUID, log: LogRef) -> list[dict[str, Any]]:
    """A convenience for a reader of one task; the monitor reads the whole log instead (§15.3)."""
    leaves = _leaves(log, 0, checkpointed_size(log)).filter(task_id=task_id).order_by("index")
    return [_served(log, leaf) for leaf in leaves]


def _refuse_beyond(log: LogRef, name: str, size: int) -> None:
    latest = checkpointed_size(log)
    if size > latest:
        raise invalid_query(name, f"must be at most the latest checkpoint's tree size ({latest})")


def _hashes(log: LogRef, ranges: list[tuple[int, int]]) -> list[str]:
    return [node.hex() for node in range_hashes(ranges, log)]


@dataclass(frozen=True)
class InclusionProof:
    index: int
    tree_size: int
    hashes: list[str]


def inclusion_proof(*, leaf_hash: str, tree_size: int, log: LogRef) -> InclusionProof:
    _refuse_beyond(log, "tree_size", tree_size)
    leaf = _leaves(log, 0, tree_size).filter(leaf_hash=leaf_hash).order_by("index").first()
    if leaf is None:
        raise Refusal(
            ErrorCode.NOT_FOUND, f"no leaf with that hash in the tree of size {tree_size}"
        )
    index = leaf.index - log.start
    return InclusionProof(index, tree_size, _hashes(log, inclusion_ranges(index, tree_size)))


def consistency_proof(*, first: int, second: int, log: LogRef) -> list[str]:
    _refuse_beyond(log, "second", second)
    return _hashes(log, consistency_ranges(first, second))


def log_stats() -> tuple[int, float]:
    """The metrics' gauges: entries in the tree, and seconds the oldest queued one has waited."""
    oldest = QueuedEntry.objects.order_by("id").values_list("queued_at", flat=True).first()
    lag = 0.0 if oldest is None else max(0.0, (timezone.now() - oldest).total_seconds())
    latest = Leaf.objects.order_by("-index").values_list("index", flat=True).first()
    return (0 if latest is None else latest + 1, lag)


def _first(log: LogRef, level: int, index: int, width: int) -> int:
    """The tile's first index among its level's nodes, once the checkpointed tree holds `width`."""
    hashes = checkpointed_size(log) >> (TILE_HEIGHT * level)  # subtrees of 256^level leaves
    first = index * TILE_WIDTH
    if hashes < first + width:
        raise Refusal(
            ErrorCode.NOT_FOUND,
            f"the latest checkpoint's tree does not hold {width} hashes of that tile",
        )
    return first


def hash_tile(*, level: int, index: int, width: int, log: LogRef) -> bytes:
    first = _first(log, level, index, width)
    hashes = Node.objects.filter(
        log=log.number, level=TILE_HEIGHT * level, index__gte=first, index__lt=first + width
    ).order_by("index")
    return b"".join(bytes(h) for h in hashes.values_list("hash", flat=True))


def entry_bundle(*, index: int, width: int, log: LogRef) -> bytes:
    """Each entry as a big-endian uint16 length and the JCS bytes its leaf hash is of."""
    first = _first(log, 0, index, width)
    entries = _leaves(log, first, first + width).order_by("index")
    raws = [text.encode() for text in entries.values_list("entry", flat=True)]
    return b"".join(len(raw).to_bytes(2, "big") + raw for raw in raws)
