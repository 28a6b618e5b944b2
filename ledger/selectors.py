"""Reads of the log (SPEC §15.3). Proofs are only given for trees a signed checkpoint names."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from core.errors import ErrorCode, Issue, Refusal
from ledger.merkle import consistency_ranges, inclusion_ranges, nodes_for, range_hash
from ledger.models import Checkpoint, Leaf, QueuedEntry
from ledger.services import nodes_get

MAX_ENTRIES = 1000


def checkpoint_latest() -> Checkpoint | None:
    return Checkpoint.objects.order_by("-id").first()


def _checkpointed_size() -> int:
    latest = checkpoint_latest()
    return 0 if latest is None else latest.tree_size


def entries_range(*, start: int, end: int) -> list[dict[str, Any]]:
    """Leaves [start, end), `end` cut to the checkpointed tree and to `MAX_ENTRIES` of them."""
    end = min(end, _checkpointed_size(), start + MAX_ENTRIES)
    leaves = Leaf.objects.filter(index__gte=start, index__lt=end).order_by("index")
    return [_served(leaf) for leaf in leaves]


def _served(leaf: Leaf) -> dict[str, Any]:
    return {"index": leaf.index, "leaf_hash": leaf.leaf_hash, "entry": json.loads(leaf.entry)}


def entries_of_task(task_id: uuid.UUID) -> list[dict[str, Any]]:
    """One task's entries under the latest checkpoint, in log order: a convenience for a reader
    of one task; the monitor reads the whole log instead of trusting it (§15.3)."""
    leaves = Leaf.objects.filter(task_id=task_id, index__lt=_checkpointed_size()).order_by("index")
    return [_served(leaf) for leaf in leaves]


def _refuse_beyond(name: str, size: int) -> None:
    latest = _checkpointed_size()
    if size > latest:
        message = f"must be at most the latest checkpoint's tree size ({latest})"
        raise Refusal(
            ErrorCode.INVALID_QUERY,
            f"{name} {message}",
            [Issue(name, ErrorCode.INVALID_QUERY, message)],
        )


def _hashes(ranges: list[tuple[int, int]]) -> list[str]:
    nodes = nodes_get(nodes_for(ranges))
    return [range_hash(start, end, nodes).hex() for start, end in ranges]


@dataclass(frozen=True)
class InclusionProof:
    index: int
    tree_size: int
    hashes: list[str]


def inclusion_proof(*, leaf_hash: str, tree_size: int) -> InclusionProof:
    """The audit path of the leaf in the tree of `tree_size` leaves; `not_found` when the leaf is
    not (yet) in that tree."""
    _refuse_beyond("tree_size", tree_size)
    leaf = Leaf.objects.filter(leaf_hash=leaf_hash, index__lt=tree_size).order_by("index").first()
    if leaf is None:
        raise Refusal(
            ErrorCode.NOT_FOUND, f"no leaf with that hash in the tree of size {tree_size}"
        )
    return InclusionProof(
        index=leaf.index,
        tree_size=tree_size,
        hashes=_hashes(inclusion_ranges(leaf.index, tree_size)),
    )


def consistency_proof(*, first: int, second: int) -> list[str]:
    _refuse_beyond("second", second)
    return _hashes(consistency_ranges(first, second))


def log_stats() -> tuple[int, float]:
    """(entries in the tree, seconds the oldest queued entry has waited): the metrics' gauges."""
    oldest = QueuedEntry.objects.order_by("id").values_list("queued_at", flat=True).first()
    lag = 0.0 if oldest is None else max(0.0, (timezone.now() - oldest).total_seconds())
    latest = Leaf.objects.order_by("-index").values_list("index", flat=True).first()
    return (0 if latest is None else latest + 1, lag)
