"""The log as C2SP `tlog-tiles` (SPEC §15.3): hash tiles and entry bundles over the stored tree.

A level-L tile's hashes are the `Node`s at tree level 8·L, and a bundle's entries are the leaves'
JCS text, so each tile is one range query. A tile of width W exists once the checkpointed tree
holds those W hashes, so every partial tile a checkpoint needed stays, and a full one never changes.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.errors import ErrorCode, Refusal
from ledger.logs import LogRef, log_first
from ledger.models import Leaf, Node
from ledger.selectors import checkpointed_size

TILE_HEIGHT = 8
TILE_WIDTH = 1 << TILE_HEIGHT
MAX_LEVEL = 63


@dataclass(frozen=True)
class Tile:
    data: bytes
    full: bool


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


def hash_tile(*, level: int, index: int, width: int, log: LogRef | None = None) -> Tile:
    log = log or log_first()
    first = _first(log, level, index, width)
    hashes = Node.objects.filter(
        log=log.number, level=TILE_HEIGHT * level, index__gte=first, index__lt=first + width
    ).order_by("index")
    return Tile(
        b"".join(bytes(h) for h in hashes.values_list("hash", flat=True)), width == TILE_WIDTH
    )


def entry_bundle(*, index: int, width: int, log: LogRef | None = None) -> Tile:
    """Each entry as a big-endian uint16 length and the JCS bytes its leaf hash is of."""
    log = log or log_first()
    first = log.start + _first(log, 0, index, width)
    entries = Leaf.objects.filter(index__gte=first, index__lt=first + width).order_by("index")
    parts = []
    for text in entries.values_list("entry", flat=True):
        raw = text.encode()
        parts += [len(raw).to_bytes(2, "big"), raw]
    return Tile(b"".join(parts), width == TILE_WIDTH)
