"""Reads of the log (SPEC §15.3). Proofs are only given for trees a signed checkpoint names."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from core.errors import ErrorCode, Issue, Refusal
from ledger.merkle import consistency_ranges, inclusion_ranges, nodes_for, range_hash
from ledger.models import Checkpoint, Cosignature, Leaf, QueuedEntry
from ledger.services import nodes_get
from ledger.witnesses import witness_quorum, witnesses_configured

MAX_ENTRIES = 1000


def checkpoint_latest() -> Checkpoint | None:
    return Checkpoint.objects.order_by("-id").first()


def checkpoint_note(checkpoint: Checkpoint) -> str:
    """The checkpoint as published (SPEC §15.3): the site's signed note with every cosignature it
    got appended after the site's signature line, still one valid signed note."""
    lines = checkpoint.cosignatures.order_by("id").values_list("line", flat=True)
    return checkpoint.note + "".join(lines)


def _quorate() -> QuerySet[Checkpoint]:
    """The checkpoints cosigned by at least the quorum of distinct configured witnesses (every
    checkpoint when no witness is configured). The count is a subquery per checkpoint, so a
    query walking an index in order stops at the first quorate one."""
    quorum = witness_quorum()
    if quorum == 0:
        return Checkpoint.objects.all()
    cosigned = (
        Cosignature.objects.filter(
            checkpoint=OuterRef("pk"), witness__in=[w.key.text for w in witnesses_configured()]
        )
        .order_by()
        .values("checkpoint")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Checkpoint.objects.annotate(cosigned=Coalesce(Subquery(cosigned), 0)).filter(
        cosigned__gte=quorum
    )


def checkpoints_covering(*, index: int) -> list[Checkpoint]:
    """The earliest checkpoint carrying the witness quorum whose tree holds entry `index`, then
    the latest carrying it (once when they are the same); `not_found` when none holds it yet."""
    earliest = _quorate().filter(tree_size__gt=index).order_by("tree_size", "id").first()
    if earliest is None:
        raise Refusal(
            ErrorCode.NOT_FOUND,
            f"no checkpoint carrying the witness quorum holds entry {index} yet",
        )
    latest = _quorate().order_by("-id").first()
    return [earliest] if latest is None or latest.pk == earliest.pk else [earliest, latest]


def checkpoint_witnessed_at(checkpoint: Checkpoint) -> datetime | None:
    """When a quorum of the configured witnesses had seen the checkpoint (SPEC §15.4): the
    quorum-th earliest of their cosignature times, None while it lacks the quorum. Without
    witnesses the site's own time of signing is the only one there is."""
    quorum = witness_quorum()
    if quorum == 0:
        return checkpoint.created_at
    times = list(
        checkpoint.cosignatures.filter(witness__in=[w.key.text for w in witnesses_configured()])
        .order_by("signed_at")
        .values_list("signed_at", flat=True)[:quorum]
    )
    return times[quorum - 1] if len(times) == quorum else None


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
