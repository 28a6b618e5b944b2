"""The site's side of a keyper release (SPEC §15.8): ask each keyper for its share of a sealed
report's key and keep the answers that verify. Keypers may be down, slow or wrong, so all are asked
at once, each for at most `RELEASE_TIMEOUT_S`, and one that fails is skipped until the next sweep,
never raised: the grace window decides when a report is void. Only the calling thread reads the
database; the caller keeps the list."""

from __future__ import annotations

import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import ValidationError

from core.canonical import canonical_json
from core.clock import parse_instant
from core.payloads import issue_message, json_path
from ledger.contributor import EntryProven, release_request
from ledger.entry_types import CONTRIBUTION, MAX_MERGE_DELAY, TASK
from ledger.keyper import ReleaseAnswer
from ledger.keyper_seal import (
    Keyper,
    release_claims,
    release_verify,
)
from ledger.logs import InLog, leaf_in_log
from ledger.models import Cosignature, Leaf
from ledger.selectors import inclusion_proof
from ledger.witnesses import (
    MAX_ANSWER_BYTES,
    Witness,
    WitnessFailure,
    answer_posted,
    keypers_configured,
    witnesses_configured,
)

if TYPE_CHECKING:
    from tasks.models import Contribution

logger = logging.getLogger(__name__)
RELEASE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class _Ask:
    keyper: Keyper
    witness: Witness
    index: int
    site: str  # the origin of the log holding the task's entry, which the shares are bound to
    body: bytes


def _cosigned_size(witness: Witness, entry: InLog) -> int | None:
    """The size of the latest checkpoint of the entry's log that holds it and this witness
    cosigned: a root the keyper keeps, so it can check proofs against it."""
    return (
        Cosignature.objects.filter(
            witness=witness.key.text,
            checkpoint__log=entry.log.number,
            checkpoint__tree_size__gt=entry.index,
        )
        .order_by("-checkpoint_id")
        .values_list("checkpoint__tree_size", flat=True)
        .first()
    )


@dataclass(frozen=True)
class _Entries:
    task: Leaf
    task_at: InLog
    contribution: Leaf
    contribution_at: InLog


def _entry_leaves(contribution: Contribution) -> _Entries | None:
    """None while either entry is not in a tree yet; a task has only a handful of entries."""
    leaves = list(Leaf.objects.filter(task_id=contribution.task_id).order_by("index"))
    entries = [json.loads(leaf.entry) for leaf in leaves]
    mine = [
        leaf
        for leaf, entry in zip(leaves, entries, strict=True)
        if entry.get("type") == CONTRIBUTION
        and entry.get("contribution_id") == str(contribution.id)
    ]
    if not mine or entries[0].get("type") != TASK:
        return None
    first, own = leaves[0], mine[0]
    return _Entries(first, leaf_in_log(first.index), own, leaf_in_log(own.index))


def _proven(leaf: Leaf, at: InLog, size: int) -> EntryProven:
    proof = inclusion_proof(leaf_hash=leaf.leaf_hash, tree_size=size, log=at.log)
    return EntryProven(at.log.origin, size, at.index, leaf.entry, proof.hashes)


def _proofs(entries: _Entries, witness: Witness) -> tuple[EntryProven, EntryProven] | None:
    """Each entry proven against the latest root of its own log the keyper cosigned (§16.2); None
    while the keyper has cosigned no checkpoint holding one."""
    task_at, contribution_at = entries.task_at, entries.contribution_at
    same_log = task_at.log == contribution_at.log
    contribution_size = _cosigned_size(witness, contribution_at)
    task_size = contribution_size if same_log else _cosigned_size(witness, task_at)
    if task_size is None or contribution_size is None:
        return None
    return (
        _proven(entries.task, task_at, task_size),
        _proven(entries.contribution, contribution_at, contribution_size),
    )


def _asks(contribution: Contribution, released: set[str]) -> list[_Ask]:
    """One request per listed keyper that has not released yet and can be asked now."""
    sealed = contribution.keyper_seal or {}
    entries = _entry_leaves(contribution)
    if entries is None or entries.task_at.index != sealed["task_entry"]:
        logger.info("releases of %s: its entries are not in the log yet", contribution.id)
        return []
    keypers = {keyper.name: keyper for keyper in keypers_configured()}
    witnesses = {witness.name: witness for witness in witnesses_configured()}
    asks = []
    for share in sealed["shares"]:
        name = share["keyper"]
        if name in released:
            continue
        keyper, witness = keypers.get(name), witnesses.get(name)
        if keyper is None or witness is None:
            logger.warning(
                "releases of %s: %s is no longer a configured keyper", contribution.id, name
            )
            continue
        proofs = _proofs(entries, witness)
        if proofs is None:
            logger.info(
                "releases of %s: %s has cosigned no checkpoint holding its entries yet",
                contribution.id,
                name,
            )
            continue
        task_entry, contribution_entry = proofs
        body = release_request(
            share,
            task_id=str(contribution.task_id),
            contribution_id=str(contribution.id),
            threshold=sealed["threshold"],
            ciphertext_digest=sealed["ciphertext_digest"],
            task_entry=task_entry,
            contribution_entry=contribution_entry,
        )
        asks.append(_Ask(keyper, witness, share["index"], task_entry.origin, canonical_json(body)))
    return asks


def _release_checked(
    ask: _Ask, contribution: Contribution, released_from: datetime, posted: tuple[int, str, bytes]
) -> dict[str, Any]:
    """The release as the evaluation lists it; WitnessFailure unless it is what it claims to be."""
    status, _, data = posted
    if len(data) > MAX_ANSWER_BYTES:
        raise WitnessFailure(f"answered more than {MAX_ANSWER_BYTES} bytes")
    if status != 200:  # 425, "not yet", is expected before the time, not a fault
        text = data.decode("utf-8", "replace").strip()[:200]
        raise WitnessFailure(f"answered {status}: {text!r}", status=status)
    try:
        answer = ReleaseAnswer.model_validate_json(data)
    except ValidationError as invalid:
        first = invalid.errors()[0]
        where = json_path(first["loc"]) or "the answer"
        raise WitnessFailure(f"answered no release ({where}: {issue_message(first)})") from None
    if answer.keyper != ask.keyper.name:
        raise WitnessFailure(f"answered as {answer.keyper!r}")
    if parse_instant(answer.released_at) < released_from:
        raise WitnessFailure(f"claims a release at {answer.released_at}, before its time")
    claims = release_claims(
        **answer.model_dump(exclude={"signature"}),
        site=ask.site,
        task_id=str(contribution.task_id),
        contribution_id=str(contribution.id),
        index=ask.index,
    )
    public = Ed25519PublicKey.from_public_bytes(ask.witness.key.public)
    if not release_verify(claims, answer.signature, public):
        raise WitnessFailure("its release's signature does not verify with its witness key")
    return {"keyper": answer.keyper, "index": ask.index, **answer.model_dump(exclude={"keyper"})}


def releases_collect(contribution: Contribution) -> list[dict[str, Any]]:
    """The releases already in `contribution.releases`, then a valid new one from each listed
    keyper that had not released; never two from one keyper. Call outside any transaction, once
    the deadline plus the merge delay has passed."""
    kept: list[dict[str, Any]] = []
    for release in contribution.releases:
        if release["keyper"] not in {r["keyper"] for r in kept}:
            kept.append(release)
    if not contribution.keyper_seal:
        return kept
    asks = _asks(contribution, {release["keyper"] for release in kept})
    if not asks:
        return kept
    released_from = contribution.task.deadline + MAX_MERGE_DELAY
    collected: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + RELEASE_TIMEOUT_S
    executor = ThreadPoolExecutor(max_workers=len(asks), thread_name_prefix="release")
    try:
        asked = {
            executor.submit(
                answer_posted, f"{ask.keyper.url}/release", ask.body, "application/json", deadline
            ): ask
            for ask in asks
        }
        done, _ = wait(asked, timeout=max(deadline - time.monotonic(), 0))
        for future, ask in asked.items():
            name = ask.keyper.name
            try:
                if future not in done:
                    raise WitnessFailure(f"did not answer within {RELEASE_TIMEOUT_S:g} s")
                posted = future.result()
                collected[name] = _release_checked(ask, contribution, released_from, posted)
            except WitnessFailure as failure:
                level = logging.INFO if failure.status == 425 else logging.WARNING
                logger.log(
                    level, "keyper %s released no share of %s: %s", name, contribution.id, failure
                )
    finally:
        executor.shutdown(wait=False, cancel_futures=True)
    return kept + [collected[ask.keyper.name] for ask in asks if ask.keyper.name in collected]
