"""The site's witnesses (SPEC §15.4, C2SP `tlog-witness`): each new checkpoint goes to every
configured witness and the cosignatures that verify are kept beside it. A witness may be slow or
down, so this runs outside the sequencer's transaction and asks all at once, each for at most
`WITNESS_TIMEOUT_S` in a thread that only speaks HTTP; one that failed is asked at the next run."""

from __future__ import annotations

import base64
import http.client
import logging
import time
import urllib.error
import urllib.request
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce

from core import statements
from ledger import log_state
from ledger.keyper_seal import Keyper
from ledger.logs import LogRef, log_current
from ledger.merkle import consistency_ranges
from ledger.models import Checkpoint, Cosignature
from ledger.services import checkpoint_latest, range_hashes
from ledger.signed_note import (
    COSIGNATURE_V1,
    DECIMAL,
    NoteError,
    VerifierKey,
    cosignature_verify,
    note_parse,
    signature_lines_parse,
    verifier_key_parse,
)

logger = logging.getLogger(__name__)
WITNESS_TIMEOUT_S = 5.0
SIZE_CONTENT_TYPE = "text/x.tlog.size"
MAX_ANSWER_BYTES = 64 * 1024


@dataclass(frozen=True)
class Witness:
    name: str
    key: VerifierKey
    url: str  # the submission prefix: `<url>/add-checkpoint`


def witnesses_configured() -> list[Witness]:
    return [
        Witness(w["name"], verifier_key_parse(w["key"], type=COSIGNATURE_V1), w["url"])
        for w in settings.CAIRN_WITNESSES
    ]


def keypers_configured() -> list[Keyper]:
    """The keypers a site's contributors seal to (SPEC §15.8), each a witness too, in
    `CAIRN_KEYPERS`' order: share i goes to the i-th."""
    return [Keyper(**keyper) for keyper in settings.CAIRN_KEYPERS]


def witness_quorum() -> int:
    return int(settings.CAIRN_WITNESS_QUORUM) if settings.CAIRN_WITNESSES else 0


def checkpoints_quorate(log: LogRef) -> QuerySet[Checkpoint]:
    """The checkpoints cosigned by the witness quorum. The count is a subquery per checkpoint,
    so a query walking an index in order stops at the first quorate one."""
    checkpoints = Checkpoint.objects.filter(log=log.number)
    quorum = witness_quorum()
    if quorum == 0:
        return checkpoints
    cosigned = (
        Cosignature.objects.filter(
            checkpoint=OuterRef("pk"), witness__in=[w.key.text for w in witnesses_configured()]
        )
        .order_by()
        .values("checkpoint")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return checkpoints.annotate(cosigned=Coalesce(Subquery(cosigned), 0)).filter(
        cosigned__gte=quorum
    )


def checkpoint_quorate_latest(log: LogRef) -> Checkpoint | None:
    return checkpoints_quorate(log).order_by("-id").first()


def checkpoint_note(checkpoint: Checkpoint) -> str:
    """The site's signed note with every cosignature it got appended: still one signed note."""
    lines = checkpoint.cosignatures.order_by("id").values_list("line", flat=True)
    return checkpoint.note + "".join(lines)


class WitnessFailure(Exception):
    """A witness that did not cosign, or a keyper (a witness too, `ledger.releases`) that gave no
    valid release; `status` is its answer's, 0 without one."""

    def __init__(self, message: str, *, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class _Cosigned:
    line: str
    signed_at: datetime  # the witness's timestamp


def answer_posted(
    url: str, data: bytes, content_type: str, deadline: float
) -> tuple[int, str, bytes]:
    """The status, content type and first `MAX_ANSWER_BYTES` + 1 bytes of the answer (one past the
    limit tells an answer too long), whatever the status; WitnessFailure when there is no answer
    before the monotonic `deadline`."""
    request = urllib.request.Request(
        url, data=data, method="POST", headers={"Content-Type": content_type}
    )
    try:
        try:
            response = urllib.request.urlopen(
                request, timeout=max(deadline - time.monotonic(), 0.01)
            )
        except urllib.error.HTTPError as error:
            response = error
        with response:
            answer_type = (response.headers.get("Content-Type") or "").split(";")[0].strip()
            return response.status or 0, answer_type, response.read(MAX_ANSWER_BYTES + 1)
    except (OSError, ValueError, http.client.HTTPException) as error:  # refused, timed out…
        raise WitnessFailure(f"could not be reached ({error})") from None


def _submit(
    witness: Witness, old: int, proof: list[bytes], note: str, body: str, deadline: float
) -> _Cosigned | int:
    """The witness's verified cosignature, or the size its 409 says it last cosigned."""
    lines = [f"old {old}\n", *(base64.b64encode(h).decode() + "\n" for h in proof), "\n"]
    data = ("".join(lines) + note).encode()
    status, content_type, answer = answer_posted(
        f"{witness.url}/add-checkpoint", data, "text/plain; charset=utf-8", deadline
    )
    text = answer[:MAX_ANSWER_BYTES].decode("utf-8", "replace")
    if status == 409 and content_type == SIZE_CONTENT_TYPE and DECIMAL.fullmatch(text.strip()):
        return int(text.strip())
    if status != 200:
        raise WitnessFailure(f"answered {status}: {text.strip()[:200]!r}", status=status)
    try:
        signatures = signature_lines_parse(text)
    except ValueError:
        raise WitnessFailure("answered with something other than note signature lines") from None
    ours = [s for s in signatures if s.name == witness.key.name and s.key_id == witness.key.key_id]
    if not ours:
        raise WitnessFailure("answered with no cosignature by its configured key")
    try:
        timestamp = cosignature_verify(body, ours[0], witness.key)
        signed_at = datetime.fromtimestamp(timestamp, tz=UTC)
    except NoteError as error:
        raise WitnessFailure(str(error)) from None
    except (OverflowError, ValueError, OSError):
        raise WitnessFailure(f"its cosignature's time ({timestamp}) is no date") from None
    return _Cosigned(ours[0].line, signed_at)


def _last_cosigned_sizes(witnesses: list[Witness], log: LogRef) -> dict[str, int]:
    """The size of the latest checkpoint each witness cosigned (0 if none), by key: the `old`
    each expects. Usually one query finds them all; any other is looked up alone."""
    keys = [w.key.text for w in witnesses]
    newest = Cosignature.objects.filter(witness__in=keys, checkpoint__log=log.number).order_by(
        "-checkpoint_id"
    )
    sizes: dict[str, int] = {}
    for key, size in newest.values_list("witness", "checkpoint__tree_size")[: len(keys)]:
        sizes.setdefault(key, size)
    for key in keys:
        if key not in sizes:
            found = newest.filter(witness=key).values_list("checkpoint__tree_size", flat=True)
            sizes[key] = found.first() or 0
    return sizes


def witnesses_cosign() -> int:
    """Ask each witness that has not cosigned the latest checkpoint (once more, from its own size,
    when it answers 409); returns how many cosignatures it kept. Call outside any transaction."""
    witnesses = witnesses_configured()
    if not witnesses:
        return 0
    log = log_current()
    latest = checkpoint_latest(log)
    identity = log_state.log_identity()
    if latest is None or identity is None or log_state.rollback_found() is not None:
        return 0
    cosigned = set(latest.cosignatures.values_list("witness", flat=True))
    pending = [w for w in witnesses if w.key.text not in cosigned]
    if not pending:
        return 0
    body = note_parse(latest.note).body
    deadline = time.monotonic() + WITNESS_TIMEOUT_S
    failures: dict[str, str] = {}
    added = 0
    executor = ThreadPoolExecutor(max_workers=len(pending), thread_name_prefix="witness")

    proofs: dict[int, list[bytes]] = {}  # by old size: witnesses in step share one

    def ask(witness: Witness, old: int) -> Future[_Cosigned | int]:
        if old not in proofs:
            ranges = consistency_ranges(old, latest.tree_size) if old < latest.tree_size else []
            proofs[old] = range_hashes(ranges, log)
        return executor.submit(_submit, witness, old, proofs[old], latest.note, body, deadline)

    sizes = _last_cosigned_sizes(pending, log)
    # Each question with its witness and, when it is the retry from the size the witness
    # named, that size: a retry refused for its proof means the witness holds another tree.
    asked: dict[Future[_Cosigned | int], tuple[Witness, int | None]] = {
        ask(w, sizes[w.key.text]): (w, None) for w in pending
    }
    try:
        while asked:
            done, _ = wait(asked, timeout=deadline - time.monotonic(), return_when=FIRST_COMPLETED)
            if not done:
                break
            for future in done:
                witness, retried = asked.pop(future)
                try:
                    answer = future.result()
                except WitnessFailure as failure:
                    failures[witness.name] = str(failure)
                    if 400 <= failure.status < 500:  # a refusal
                        log_state.witness_refusal_counted(identity, witness.name)
                    if retried is not None and failure.status == 422:
                        log_state.witness_fork_kept(identity, witness.name, retried)
                    continue
                if isinstance(answer, _Cosigned):
                    _keep(latest, witness, answer)
                    log_state.witness_kept(
                        identity, witness.name, latest.tree_size, latest.root_hash
                    )
                    added += 1
                    continue
                log_state.witness_kept(identity, witness.name, answer, None)
                if retried is not None or answer > latest.tree_size:
                    log_state.witness_refusal_counted(identity, witness.name)
                    failures[witness.name] = f"holds a tree of size {answer} (409)"
                else:
                    asked[ask(witness, answer)] = (witness, answer)
    finally:
        executor.shutdown(wait=False, cancel_futures=True)
    for witness, _ in asked.values():
        failures[witness.name] = f"did not answer within {WITNESS_TIMEOUT_S:g} s"
    for name, reason in failures.items():
        logger.warning(
            "witness %s did not cosign checkpoint %s: %s", name, latest.tree_size, reason
        )
    # Kept beside the site's keys once it carries the quorum (SPEC §16.2).
    if added and checkpoints_quorate(log).filter(pk=latest.pk).exists():
        note = checkpoint_note(latest)
        log_state.witnessed_kept(identity, latest.tree_size, latest.root_hash, note)
    return added


def _keep(checkpoint: Checkpoint, witness: Witness, cosigned: _Cosigned) -> None:
    """A concurrent run may have stored this witness's cosignature already."""
    statements.write_all(
        statements.inserted(
            Cosignature,
            {
                "checkpoint": checkpoint.pk,
                "witness": witness.key.text,
                "signed_at": cosigned.signed_at,
                "line": cosigned.line,
            },
            ignore_conflicts=True,
        )
    )
