"""What the site has promised about its log (SPEC §16.2): the largest checkpoint it signed and the
largest tree each witness holds, kept in a JSON file (`CAIRN_LOG_STATE`) beside the site's keys,
since signed checkpoints outlive a database that goes back in time. The sequencer signs only a tree
that extends them all; until the database does again, the site signs nothing and refuses writes.
Keyed by the hash of each log's first leaf: a restored database meets its log's state; a new one,
or a restarted log, starts its own.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import Subquery, Value
from django.db.models.functions import Coalesce
from pydantic import TypeAdapter

from core.clock import format_instant, now_ms
from core.errors import ErrorCode, Refusal
from ledger.models import Checkpoint, Leaf, Log

RETRY_AFTER_S = 60


@dataclass(frozen=True)
class Rollback:
    """The database's log does not extend a tree this site signed or a witness holds."""

    database_size: int
    promised_size: int
    promised_by: str  # "the site" or a witness's name
    found_at: str

    def message(self) -> str:
        return (
            f"the log has gone back: the database holds {self.database_size} entries, which do "
            f"not extend the tree of {self.promised_size} entries {self.promised_by} "
            f"{'signed' if self.promised_by == 'the site' else 'holds'}; this site signs nothing "
            f"and accepts no write until the keeper restores the lost data or starts a new log "
            f"(docs/deployment.md)"
        )


@dataclass
class Promised:
    """A tree size and, when known, its root hash (hex). `differs` when a witness refused our
    tree of that size: it holds another."""

    size: int
    root: str | None = None
    differs: bool = False
    note: str | None = None  # the checkpoint's text, when the site made it


@dataclass
class LogPromises:
    signed: Promised | None = None
    # The largest checkpoint that carried the witness quorum, its cosignatures in its note: the
    # promise a restarted log's first entry records, though the database lost it.
    witnessed: Promised | None = None
    witnesses: dict[str, Promised] = field(default_factory=dict)
    refusals: dict[str, int] = field(default_factory=dict)
    rollback: Rollback | None = None


_LOGS = TypeAdapter(dict[str, LogPromises])


def _path() -> Path:
    return Path(settings.CAIRN_LOG_STATE)


def _read(path: Path) -> tuple[dict[str, LogPromises], list[dict[str, Any]]]:
    """The promises by log identity, and the logs the keeper started (`manage.py log_restart`)."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}, []
    return _LOGS.validate_python(data.get("logs", {})), list(data.get("started", []))


def _write(logs: dict[str, LogPromises], started: list[dict[str, Any]]) -> None:
    """Replace the file whole and durably: a crash leaves the old state or the new, never half."""
    path = _path()
    temporary = path.with_name(path.name + ".new")
    kept = {"version": 1, "logs": {k: asdict(v) for k, v in logs.items()}, "started": started}
    with open(temporary, "w") as file:
        json.dump(kept, file, indent=1)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


@contextmanager
def _locked() -> Iterator[None]:
    path = _path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@contextmanager
def _changing(identity: str) -> Iterator[LogPromises]:
    """The promises of one log, written back when the block ends."""
    with _locked():
        logs, started = _read(_path())
        promises = logs.setdefault(identity, LogPromises())
        before = asdict(promises)
        yield promises
        if asdict(promises) != before:
            _write(logs, started)


def log_started_kept(number: int, origin: str) -> None:
    """Kept here so the card lists it even if the database goes back to before it."""
    with _locked():
        logs, started = _read(_path())
        if all(log["number"] != number for log in started):
            _write(logs, [*started, {"number": number, "origin": origin}])


def logs_started() -> list[dict[str, Any]]:
    """The logs the keeper started, oldest first, `{"number", "origin"}` each. The card asks on
    every request, so the file is parsed again only when its inode, size or change time differ
    (`_write` replaces it). Writes, signatures and readiness read it every time: on network storage
    a stat may be answered from a cache for seconds, which a card cached for minutes can afford."""
    path = os.fspath(settings.CAIRN_LOG_STATE)
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return []
    return list(_started(path, found.st_ino, found.st_size, found.st_ctime_ns))


@lru_cache(maxsize=1)
def _started(path: str, inode: int, size: int, changed_ns: int) -> tuple[dict[str, Any], ...]:
    # Read after the stat that keys it: what is kept is never older than its key's file.
    return tuple(sorted(_read(Path(path))[1], key=lambda log: int(log["number"])))


def log_identity() -> str | None:
    """The hash of the current log's first leaf (None while the log is empty)."""
    start = Coalesce(Subquery(Log.objects.order_by("-number").values("start")[:1]), Value(0))
    return Leaf.objects.filter(index=start).values_list("leaf_hash", flat=True).first()


def promises_of(identity: str) -> LogPromises | None:
    return _read(_path())[0].get(identity)


def rollback_of(identity: str, size: int, root_at: Callable[[int], bytes]) -> Rollback | None:
    """How a tree of `size` entries, whose first n have the root `root_at(n)`, fails to extend
    what was promised; None when it extends it all."""
    promises = promises_of(identity)
    if promises is None:
        return None
    kept = [("the site", promises.signed)] if promises.signed else []
    for by, promised in [*kept, *promises.witnesses.items()]:
        if promised.size == 0:
            continue
        extends = (
            not promised.differs
            and size >= promised.size
            and (promised.root is None or root_at(promised.size).hex() == promised.root)
        )
        if not extends:
            return Rollback(size, promised.size, by, format_instant(now_ms()))
    return None


def rollback_kept(identity: str, rollback: Rollback | None) -> None:
    """Record the sequencer's finding, a rollback or none; the first finding's time is kept."""
    with _changing(identity) as promises:
        if rollback is not None and promises.rollback is not None:
            rollback = replace(rollback, found_at=promises.rollback.found_at)
        promises.rollback = rollback


def signed_kept(identity: str, checkpoint: Checkpoint) -> None:
    with _changing(identity) as promises:
        if promises.signed is None or checkpoint.tree_size > promises.signed.size:
            promises.signed = Promised(
                checkpoint.tree_size, checkpoint.root_hash, note=checkpoint.note
            )


def witnessed_kept(identity: str, size: int, root: str, note: str) -> None:
    """A checkpoint that now carries the witness quorum, `note` with its cosignatures."""
    with _changing(identity) as promises:
        held = promises.witnessed
        if held is None or size > held.size or (size == held.size and note != held.note):
            promises.witnessed = Promised(size, root, note=note)


def witness_kept(identity: str, witness: str, size: int, root: str | None) -> None:
    """A tree the witness holds: one it cosigned (its root known) or the size its 409 named."""
    with _changing(identity) as promises:
        held = promises.witnesses.get(witness)
        if held is None or size > held.size or (size == held.size and root is not None):
            promises.witnesses[witness] = Promised(size, root)


def witness_fork_kept(identity: str, witness: str, size: int) -> None:
    """The witness holds a tree of `size` entries and refused the proof that ours extends it."""
    with _changing(identity) as promises:
        promises.witnesses[witness] = Promised(size, None, differs=True)


def witness_refusal_counted(identity: str, witness: str) -> None:
    with _changing(identity) as promises:
        promises.refusals[witness] = promises.refusals.get(witness, 0) + 1


def witness_refusals() -> dict[str, int]:
    """Refusals by witness, over every log this site has kept promises of."""
    counted: Counter[str] = Counter()
    for promises in _read(_path())[0].values():
        counted.update(promises.refusals)
    return dict(counted)


def rollback_found() -> Rollback | None:
    """Reads the database only when some log has gone back: writes pay nothing while all is well."""
    found = {k: v.rollback for k, v in _read(_path())[0].items() if v.rollback is not None}
    return found.get(log_identity() or "") if found else None


def writes_refused_if_rolled_back() -> None:
    """A receipt written now would promise an entry under a checkpoint this site cannot sign."""
    rollback = rollback_found()
    if rollback is not None:
        raise Refusal(ErrorCode.UNAVAILABLE, rollback.message(), retry_after=RETRY_AFTER_S)
