"""Writes into the log. A write queues its entry in its own transaction, so an entry exists exactly
when the write does; one sequencer at a time (a PostgreSQL advisory lock, or SQLite's write lock
taken by an IMMEDIATE transaction) integrates them in queue order and signs a checkpoint."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import Max

from core import statements
from core.canonical import canonical_json
from core.clock import format_instant, now_ms
from ledger import entry_types, log_state
from ledger.logs import LogRef, log_current
from ledger.merkle import leaf_hash, nodes_for, parents_closed_by, perfect_nodes, range_hash
from ledger.models import Checkpoint, Leaf, Node, QueuedEntry
from ledger.notes import checkpoint_sign

if TYPE_CHECKING:
    from tasks.models import Contribution

logger = logging.getLogger(__name__)

# pg_advisory_xact_lock's key: "cairnlog" read as a big-endian 64-bit integer, signed.
SEQUENCER_LOCK = int.from_bytes(b"cairnlog", "big", signed=True)


def log_writes(entries: Iterable[dict[str, Any]]) -> tuple[statements.Write, ...]:
    """The rows that queue entries, for a write to send with its own inside its transaction:
    plain SQL, since every accepted write pays for them. Refused while the log has gone back."""
    log_state.writes_refused_if_rolled_back()
    at = now_ms()
    return statements.rows_inserted(
        QueuedEntry,
        ["entry", "queued_at"],
        [(canonical_json(entry).decode(), at) for entry in entries],
    )


def contribution_entry(contribution: Contribution) -> dict[str, Any]:
    keyper_seal = contribution.keyper_seal
    return entry_types.contribution_entry(
        task_id=str(contribution.task_id),
        contribution_id=str(contribution.id),
        report_digest=contribution.report_digest,
        salt=contribution.salt,
        keyper_commitment=keyper_seal["commitment"] if keyper_seal is not None else None,
        received_at=format_instant(contribution.received_at),
    )


def log_queue(entries: Iterable[dict[str, Any]]) -> None:
    """Call inside the transaction of the write the entries record."""
    statements.write_all(*log_writes(entries))


def tree_size(log: LogRef) -> int:
    """The size of the current log's tree (an earlier log's leaves run on into the next's)."""
    last = Leaf.objects.filter(index__gte=log.start).aggregate(last=Max("index"))["last"]
    return 0 if last is None else last + 1 - log.start


def nodes_get(keys: Iterable[tuple[int, int]], *, log: int) -> dict[tuple[int, int], bytes]:
    """In one query (none for no keys)."""
    by_level: dict[int, list[int]] = {}
    for level, index in keys:
        by_level.setdefault(level, []).append(index)
    query = Node.objects.none()
    for level, indexes in by_level.items():
        query = query | Node.objects.filter(log=log, level=level, index__in=indexes)
    return {(node.level, node.index): bytes(node.hash) for node in query}


def entry_task_id(entry: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(json.loads(entry).get("task_id")))
    except (ValueError, AttributeError):
        return None


def _append(queued: list[QueuedEntry], size: int, log: LogRef) -> int:
    """Append `queued`, storing every node it completes, and delete them from the queue; returns
    the new size. A restart entry is appended unqueued (no id)."""
    nodes = nodes_get(perfect_nodes(0, size), log=log.number)  # the frontier: left siblings
    at = now_ms()
    leaves, new_nodes = [], []
    for index, item in enumerate(queued, start=size):
        leaf = leaf_hash(item.entry.encode())
        leaves.append(
            Leaf(
                index=log.start + index,
                leaf_hash=leaf.hex(),
                entry=item.entry,
                task_id=entry_task_id(item.entry),
                queued_at=item.queued_at,
                integrated_at=at,
            )
        )
        for key, value in parents_closed_by(index, leaf, nodes):
            nodes[key] = value
            new_nodes.append(Node(log=log.number, level=key[0], index=key[1], hash=value))
    statements.write_all(
        *statements.objects_inserted(leaves),
        *statements.objects_inserted(new_nodes),
        *statements.deleted(QueuedEntry, [item.id for item in queued if item.id is not None]),
    )
    return size + len(queued)


def range_hashes(ranges: list[tuple[int, int]], log: LogRef) -> list[bytes]:
    nodes = nodes_get(nodes_for(ranges), log=log.number)
    return [range_hash(start, end, nodes) for start, end in ranges]


def root_at(size: int, log: LogRef) -> bytes:
    [root] = range_hashes([(0, size)], log)
    return root


def checkpoint_latest(log: LogRef) -> Checkpoint | None:
    return Checkpoint.objects.filter(log=log.number).order_by("-id").first()


def checkpoint_publish(size: int, log: LogRef) -> Checkpoint:
    root = root_at(size, log)
    return statements.created(
        Checkpoint(
            log=log.number,
            tree_size=size,
            root_hash=root.hex(),
            note=checkpoint_sign(size, root, log.origin),
            created_at=now_ms(),
        )
    )


class _GoneBack(Exception):
    """Rolls back the sequencer's transaction; args: the log's identity, the `log_state.Rollback`."""


def _sequence_batch(batch_size: int) -> tuple[int, str | None, Checkpoint] | None:
    """One transaction of the sequencer: the entries it appended, the log's identity and the
    latest checkpoint; None when another sequencer is at work."""
    with transaction.atomic():
        if not statements.advisory_lock(SEQUENCER_LOCK, wait=False):
            return None
        log = log_current()
        size = tree_size(log)
        queued = list(QueuedEntry.objects.order_by("id")[:batch_size])
        if queued:
            size = _append(queued, size, log)
        identity = log_state.log_identity()
        if identity is not None:
            rollback = log_state.rollback_of(identity, size, lambda n: root_at(n, log))
            if rollback is not None:
                raise _GoneBack(identity, rollback)
        latest = checkpoint_latest(log)
        if latest is None or latest.tree_size != size:
            latest = checkpoint_publish(size, log)
    return len(queued), identity, latest


def log_sequence(*, batch_size: int = 1000) -> int:
    """Integrate queued entries in order and sign a checkpoint of the grown tree; returns how
    many were appended (0 too when another sequencer is at work or the log has gone back)."""
    appended = 0
    identity = None
    while True:
        try:
            batch = _sequence_batch(batch_size)
        except _GoneBack as gone:
            identity, rollback = gone.args
            log_state.rollback_kept(identity, rollback)
            logger.error("%s", rollback.message())
            return appended
        if batch is None:
            return appended
        count, identity, latest = batch
        if identity is not None:
            log_state.signed_kept(identity, latest)
        appended += count
        if count < batch_size:
            break
    if identity is not None and log_state.rollback_found() is not None:
        log_state.rollback_kept(identity, None)
    return appended
