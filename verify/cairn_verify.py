# /// script
# requires-python = ">=3.11"
# dependencies = ["cryptography>=47", "joserfc>=1.0", "orjson>=3.10", "pycryptodome>=3.20", "rfc8785>=0.1.4"]
# ///
"""Check a Cairn site offline, trusting only the site key, witnesses and keypers pinned on first use (SPEC §15.5, §15.8).

    cairn_verify.py task <id | URL | saved JSON>   the task, its reports (keyper-sealed ones opened
                                                   again from their releases), its evaluation, its
                                                   entries in the log and the log's rules over them
    cairn_verify.py receipt <file>                 a receipt: its signature, its contribution in the
                                                   log and in the evaluation (or proof of omission)
    cairn_verify.py log [--full]                   the latest witnessed checkpoint, consistent with the
                                                   last one kept; --full recomputes its root
    cairn_verify.py monitor                        every entry not read before: the tree, the log's
                                                   rules, and each evaluation against its log
    cairn_verify.py seal <task> <report.json>      prints the keyper-sealed data part of a report
                                                   (cairn.task.contribution.sealed/0.1) for any client
    cairn_verify.py dispute <receipt> <report.json>
                                                   whether the void of a keyper-sealed contribution is
                                                   wrongful, from its contributor's receipt and report

The first run pins the site's JWKS, and the witnesses, keypers and keyper threshold its card names,
under CAIRN_HOME/verify/ (CAIRN_HOME defaults to ~/.cairn); every run keeps the latest checkpoint
it accepted there. A later card naming other keypers or another threshold fails. --witnesses FILE
pins these from an independent source instead, one a line:

    <witness verifier key> [<its URL>]          a witness (C2SP tlog-cosignature key)
    quorum <k>                                  how many of them must cosign (default: all)
    keyper <name> <hpke_key> <URL>              a keyper, in the site's order; its name is a witness's
    keyper_threshold <k>                        how many keypers open a sealed report

and then a card naming fewer witnesses, a lower quorum, or other keypers fails.

`seal` checks the report against the rules the site applies at the deadline, and the task's log
entry and deadline under a witnessed checkpoint, then prints the sealed payload on stdout (the
checks go to stderr) and keeps the report and its salt in CAIRN_HOME/sealed/ (mode 0600): that
file, or any JSON object with the report and salt (`{"report": {...}, "salt": "..."}`, as the local
MCP keeps them in CAIRN_HOME/sealed/<contribution id>.json), is the report.json of `dispute`.

A site that lost logged entries and restarted its log (SPEC §16.2) lists every log on its card;
their origins are pinned too, and every command follows the chain: each restart is checked, its
lost entries are said (LOST), and a receipt for one of them is reported as DROPPED BY THE SITE.

Exit status: 0 only when everything checks (for `dispute`: the evaluation counts the contribution
with this report, or its void is right); 1 when something does not check or cannot be checked, each
failure saying what does not match (a log that went back in time first, as a ROLLBACK with both
signed notes); 3 (`dispute` only) when the output is proof of a wrongful void, an omission or an
alteration, printed with the signed receipt as its evidence; 75 when nothing failed but an entry is
not yet witnessed while its merge delay (60 s) still runs: run again after the time printed.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import copy
import hashlib
import itertools
import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
import uuid
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO, cast

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from joserfc import jws
from joserfc.errors import JoseError, SecurityWarning
from joserfc.jwk import KeySet, KeySetSerialization

from core.canonical import canonical_digest, canonical_json
from core.privacy import screen, texts_anywhere
from core.wire_names import CONTRIBUTION_SCHEMA, INCONSISTENT_SHARES, KEYS_UNAVAILABLE
from ledger.contributor import (
    EntryProven,
    KeyperCheckpoint,
    entry_log,
    release_request,
    sealed_kept,
)
from ledger.entry_types import (
    CONTRIBUTION,
    EVALUATION,
    MAX_MERGE_DELAY,
    RESTART,
    TASK,
    contribution_entry,
    evaluation_entry,
    task_entry,
)
from ledger.keyper_seal import (
    KEY_BYTES,
    Keyper,
    SealError,
    b64u_decode,
    ciphertext_digest,
    commitment_of,
    key_combine,
    release_claims,
    release_verify,
    report_open,
)
from ledger.merkle import consistency_verify, inclusion_verify, leaf_hash, node_hash
from ledger.pins import (
    card_trust,
    keypers_differ,
    logs_listed,
    pins_completed,
    site_keys,
    witness_key,
)
from ledger.signed_note import NoteError, VerifierKey, checkpoint_checked
from tasks.report_checks import report_texts, source_in_task_issues

DEFAULT_CAIRN_URL = "http://127.0.0.1:8000"
# How long the site waits for the keypers' releases after the deadline + 60 s before it voids a
# sealed report as keys_unavailable, when its card does not say (SPEC §15.8's default).
DEFAULT_KEYPER_GRACE_S = 600
VERIFIABLE_EXTENSION = "urn:cairn:verifiable:v1"
VERDICTS = ("source_supported", "source_contradicted", "source_unclear")
REQUEST_FIELDS = (
    "title",
    "question",
    "sources",
    "acceptance_criteria",
    "deadline",
    "min_independent",
    "max_contributors",
    "budget",
)
LOG_PATH = "/api/log"
NO_WITNESSES = (
    "no witnesses are pinned for this site: a split view (another history shown to others) or a "
    "late entry cannot be ruled out"
)
# `dispute`'s exit status when its output proves the site wrong (1 is any other failure).
PROOF = 3
# The exit status when nothing failed but an entry checked is still within its merge delay and not
# yet witnessed (sysexits' EX_TEMPFAIL: run again later).
NOT_YET = 75


class Failed(Exception):
    """A check that does not hold; its message says what does not match."""


class RolledBack(Failed):
    """Two checkpoints signed by the site where the later does not extend the earlier: the site's
    log went back in time, which explains every entry-by-entry failure that would follow."""

    def __init__(self, earlier: Checkpoint, later: Checkpoint, why: str) -> None:
        notes = "\n".join(
            f"      {line}"
            for checkpoint in (earlier, later)
            for line in [*checkpoint.text.rstrip("\n").split("\n"), ""]
        )
        super().__init__(
            f"ROLLBACK: the site signed a tree of {earlier.size} entries, then a tree of "
            f"{later.size} entries that does not extend it ({why}). Its log went back in time; "
            f"both signed notes follow, the earlier first:\n{notes.rstrip()}"
        )


@dataclass(frozen=True)
class LogServed:
    """One of the site's logs, as its card lists them oldest first (§16.2)."""

    place: int  # its place in the card's list, from 0
    origin: str | None  # None on a site whose card lists no logs: its one log
    path: str  # where its routes are served

    @property
    def kept_name(self) -> str:
        """The file the last checkpoint kept of this log is in: log 0's as it always was."""
        return "checkpoint" if self.place == 0 else f"checkpoint.{self.place}"


@dataclass(frozen=True)
class Restart:
    """A log started after the site lost entries of the one before: entries `lost_from` up to
    `lost_to` of `previous` were promised under a signed checkpoint and are gone."""

    previous: LogServed
    checkpoint: Checkpoint  # the previous log's largest checkpoint known: the proof of the loss
    lost_from: int
    lost_to: int


# --- RFC 9162 §2.1 -----------------------------------------------------------------------------


def check_consistency(
    first: int, second: int, first_root: bytes, second_root: bytes, path: list[bytes]
) -> None:
    """RFC 9162 §2.1.4.2 as the site checks it, each failure named for what it means here."""
    if consistency_verify(first, second, first_root, second_root, path):
        return
    if first > second:
        raise Failed(f"the log shrank from {first} to {second} entries")
    if first == second:
        raise Failed(f"two different roots for the same tree size {first}")
    raise Failed(
        f"the tree of {second} entries does not extend the tree of {first} entries seen "
        "before: the log rewrote its history"
    )


@dataclass
class CompactRange:
    """The roots of the perfect subtrees of a tree's leaves so far: enough to append and to give
    the root, so the monitor keeps only these between runs, whatever the log's length."""

    size: int = 0
    nodes: list[tuple[int, bytes]] = field(default_factory=list)

    def append(self, leaf: bytes) -> None:
        self.nodes.append((0, leaf))
        while len(self.nodes) > 1 and self.nodes[-1][0] == self.nodes[-2][0]:
            level, right = self.nodes.pop()
            _, left = self.nodes.pop()
            self.nodes.append((level + 1, node_hash(left, right)))
        self.size += 1

    def root(self) -> bytes:
        if not self.nodes:
            return hashlib.sha256(b"").digest()
        result = self.nodes[-1][1]
        for _, left in reversed(self.nodes[:-1]):
            result = node_hash(left, result)
        return result

    def saved(self) -> dict[str, Any]:
        return {"size": self.size, "nodes": [[level, h.hex()] for level, h in self.nodes]}

    @classmethod
    def loaded(cls, saved: dict[str, Any]) -> CompactRange:
        return cls(saved["size"], [(level, bytes.fromhex(h)) for level, h in saved["nodes"]])


# --- Signed notes: checkpoints and witness cosignatures (C2SP) ---------------------------------


@dataclass(frozen=True)
class Checkpoint:
    text: str
    origin: str  # the log's name, its first line: the `site` a seal is bound to
    size: int
    root: bytes
    cosigned: dict[str, int]  # pinned witness key → the POSIX time it cosigned this checkpoint

    def witnessed_at(self, quorum: int) -> int | None:
        """The quorum-th earliest cosignature time: when a quorum had seen this tree (§15.4)."""
        times = sorted(self.cosigned.values())
        return times[quorum - 1] if 0 < quorum <= len(times) else None


# --- The rules a sealed report meets once opened (§4.1, §5, §15.8) ------------------------------
# The site checks a plain report at receipt and a keyper-sealed one at the deadline, when it first
# reads it; whoever holds the plaintext can run the same rules here.

REPORT_FIELDS = (
    "schema",
    "verdict",
    "summary",
    "conditions",
    "attempts",
    "limitations",
    "source_urls",
)
# Each list of a report: (fewest items, most items); every item is a text of 1 to 500 characters.
REPORT_LISTS = {
    "conditions": (0, 10),
    "attempts": (1, 10),
    "limitations": (0, 10),
    "source_urls": (1, 10),
}
# Control characters (other than the newline) and invisible or direction-changing characters.
HIDDEN = re.compile(
    r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)


def _issue(path: str, code: str, message: str) -> dict[str, str]:
    return {"path": path, "code": code, "message": message}


def _text_problem(value: Any, shortest: int, longest: int) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    if not shortest <= len(value) <= longest:
        return f"must hold {shortest} to {longest} characters"
    if HIDDEN.search(value):
        return "holds a control or invisible character (only \\n is allowed)"
    return None


def report_shape_issues(report: Any) -> tuple[str, list[dict[str, str]]]:
    """§4.1's shape of a report without its approval, as the site's model checks it: the code
    (`unknown_schema` or `invalid_payload`) and every issue, or ("", []) when it has that shape."""
    if (
        isinstance(report, dict)
        and report.get("schema", CONTRIBUTION_SCHEMA) != CONTRIBUTION_SCHEMA
    ):
        return "unknown_schema", [
            _issue("schema", "unknown_schema", f"expected {CONTRIBUTION_SCHEMA!r}")
        ]
    if not isinstance(report, dict):
        return "invalid_payload", [_issue("", "invalid_payload", "must be an object")]
    problems = [(name, "unknown field") for name in report if name not in REPORT_FIELDS]
    problems += [
        (name, "required field is missing") for name in REPORT_FIELDS if name not in report
    ]
    if "verdict" in report and report["verdict"] not in VERDICTS:
        problems.append(("verdict", f"must be one of {', '.join(VERDICTS)}"))
    summary = _text_problem(report.get("summary"), 20, 2000) if "summary" in report else None
    if summary:
        problems.append(("summary", summary))
    for name, (fewest, most) in REPORT_LISTS.items():
        items = report.get(name)
        if name not in report:
            continue
        if not isinstance(items, list):
            problems.append((name, "must be a list"))
            continue
        if not fewest <= len(items) <= most:
            problems.append((name, f"must hold {fewest} to {most} items"))
        for index, item in enumerate(items):
            problem = _text_problem(item, 1, 500)
            if problem:
                problems.append((f"{name}[{index}]", problem))
        if name == "source_urls" and len(set(map(str, items))) != len(items):
            problems.append((name, "items must be unique"))
    return (
        ("invalid_payload", [_issue(p, "invalid_payload", m) for p, m in problems])
        if problems
        else ("", [])
    )


def report_rules(report: Any, sources: list[str]) -> tuple[str, list[dict[str, str]]]:
    """The first rule the report breaks, in the site's order (shape, the task's sources, the
    privacy screen), with its issues; ("", []) when it breaks none. A report void for another
    rule is published with what opens it, so private text anywhere in it, keys and unknown
    fields too, makes it void as private_content instead, which publishes neither."""
    code, issues = _first_rule_broken(report, sources)
    if code and code != "private_content":
        anywhere = [issue.as_dict() for issue in screen(texts_anywhere(report))]
        if anywhere:
            return "private_content", anywhere
    return code, issues


def _first_rule_broken(report: Any, sources: list[str]) -> tuple[str, list[dict[str, str]]]:
    code, issues = report_shape_issues(report)
    if code:
        return code, issues
    issues = [issue.as_dict() for issue in source_in_task_issues(report["source_urls"], sources)]
    if issues:
        return "source_not_in_task", issues
    issues = [issue.as_dict() for issue in screen(report_texts(report))]
    return ("private_content", issues) if issues else ("", [])


# --- The site, and what this verifier pinned of it ---------------------------------------------


class Site:
    def __init__(self, url: str, home: Path, witnesses_file: str | None = None) -> None:
        self.url = url.rstrip("/")
        host = urllib.parse.urlsplit(self.url).netloc.replace(":", "_")
        self.cairn_home = home
        self.home = home / "verify" / host
        self._card: dict[str, Any] | None = None
        self.jwks = self._pinned_jwks()
        pinned = self._pinned_trust(witnesses_file)
        try:
            self.witnesses = [witness_key(key) for key in pinned["keys"]]
        except NoteError as error:
            raise Failed(str(error)) from None
        self.quorum = int(pinned["quorum"])
        if not 0 <= self.quorum <= len(self.witnesses) or (self.witnesses and self.quorum == 0):
            raise Failed(
                f"a quorum of {self.quorum} among {len(self.witnesses)} witnesses makes no sense"
            )
        self.witness_urls: dict[str, str] = pinned["urls"]
        self.keypers = [Keyper(**keyper) for keyper in pinned["keypers"]]
        self.keyper_threshold = int(pinned["keyper_threshold"])
        self._keypers_make_sense()
        self.logs = self._pinned_logs()
        self.log_path = self.logs[-1].path
        self.restarts: list[Restart] = []
        self.trusted: Checkpoint | None = None

    def get(self, path: str, query: dict[str, Any] | None = None) -> tuple[int, bytes]:
        return http_get(self.url + path + ("?" + urllib.parse.urlencode(query) if query else ""))

    def get_json(self, path: str, query: dict[str, Any] | None = None) -> Any:
        status, body = self.get(path, query)
        if status != 200:
            raise Failed(f"{path} answered {status}: {body[:200].decode(errors='replace')}")
        return json.loads(body)

    def _pin(self, name: str, value: Any) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / name).write_text(json.dumps(value, indent=2), encoding="utf-8")

    def _pinned_jwks(self) -> dict[str, Any]:
        pinned = self.home / "jwks.json"
        if pinned.is_file():
            return json.loads(pinned.read_text(encoding="utf-8"))
        jwks = self.get_json("/.well-known/jwks.json")
        self._pin("jwks.json", jwks)
        print(f"pinned the site keys of {self.url} in {pinned}")
        return jwks

    def card_params(self) -> dict[str, Any]:
        """The params of the card's verifiable extension (§15.7), read once a run."""
        if self._card is None:
            self._card = {}
            card = self.get_json("/.well-known/agent-card.json")
            for extension in card.get("capabilities", {}).get("extensions", []):
                if extension.get("uri") == VERIFIABLE_EXTENSION:
                    self._card = extension.get("params", {})
        return self._card

    def _pinned_trust(self, witnesses_file: str | None) -> dict[str, Any]:
        """The witnesses, their URLs, the keypers and the threshold pinned for this site: from the
        file given, else as pinned before, else the card's. Keypers are pinned the first time the
        card names any; after that a card naming others, or another threshold, fails."""
        pinned_file = self.home / "witnesses.json"
        card = card_trust(self.card_params())
        if witnesses_file is not None:
            pinned = _witnesses_file(Path(witnesses_file))
            self._card_names_them(pinned, card)
        elif pinned_file.is_file():
            pinned = json.loads(pinned_file.read_text(encoding="utf-8"))
        else:
            pinned = card
            print(
                f"pinned {len(card['keys'])} witness(es), quorum {card['quorum']}, from the "
                "site's card"
            )
        before = dict(pinned)
        pinned, keypers_pinned_now = pins_completed(pinned, card)
        if keypers_pinned_now:
            print(
                f"pinned {len(card['keypers'])} keyper(s), threshold {card['keyper_threshold']}, "
                "from the site's card"
            )
        if pinned != before or witnesses_file is not None or not pinned_file.is_file():
            self._pin("witnesses.json", pinned)
        _same_keypers(pinned, card, pinned_file)
        return pinned

    def _pinned_logs(self) -> list[LogServed]:
        """The site's logs, oldest first, as its card lists them; their origins are pinned with
        the keys on first use, and a later card must keep every one pinned, in its place."""
        try:
            listed = logs_listed(self.card_params())
        except ValueError as error:
            raise Failed(str(error)) from None
        pinned_file = self.home / "logs.json"
        pinned = (
            json.loads(pinned_file.read_text(encoding="utf-8")) if pinned_file.is_file() else []
        )
        if not listed:
            if pinned:
                raise Failed(f"the site's card no longer lists its logs; pinned before: {pinned}")
            return [LogServed(0, None, LOG_PATH)]
        logs = [LogServed(place, log.origin, log.path) for place, log in enumerate(listed)]
        origins = [log.origin for log in listed]
        if origins[: len(pinned)] != pinned:
            raise Failed(
                f"the site's card lists the logs {origins}, which drop or reorder the ones pinned "
                f"before, {pinned}: a log the site started cannot be taken back"
            )
        if len(origins) > len(pinned):
            self._pin("logs.json", origins)
            print(f"pinned the site's logs: {', '.join(origins[len(pinned) :])}")
        return logs

    def on_log(self, log: LogServed, trusted: Checkpoint | None) -> Site:
        """This site as seen through another of its logs, trusting that log's checkpoint."""
        other = copy.copy(self)
        other.log_path, other.trusted = log.path, trusted
        return other

    def _kept(self, log: LogServed) -> Checkpoint | None:
        kept_file = self.home / log.kept_name
        if not kept_file.is_file():
            return None
        return self.checkpoint(kept_file.read_text(encoding="utf-8"))

    def _served_witnessed(self, log: LogServed) -> Checkpoint | None:
        """An earlier log's latest checkpoint carrying the quorum, as the site serves it still
        (two such checkpoints of one origin are consistent, or the witnesses broke their word)."""
        status, body = self.get(f"{log.path}/checkpoint")
        if status != 200:
            raise Failed(f"{log.origin} has no checkpoint to check ({status})")
        served = self.on_log(log, None)
        latest = self.checkpoint(body.decode())
        if not self.witnesses or self.quorate(latest):
            return latest
        return served._latest_quorate(latest)

    def restarts_checked(self, report: Report, trusted: Checkpoint) -> None:
        """Each log after the first begins with a restart entry (§16.2): signed by the site for
        the log before, cosigned by the pinned quorum, agreeing with what this verifier kept of
        that log. The entries it says are lost are said plainly; an old log that is only frozen
        is no failure."""
        for log in self.logs[1:]:
            previous = self.logs[log.place - 1]
            reading = self.on_log(log, trusted if log is self.logs[-1] else None)
            if reading.trusted is None:
                reading.trusted = self._served_witnessed(log)
            assert reading.trusted is not None
            first = self.get_json(f"{log.path}/entries", {"start": 0, "end": 1})["entries"]
            if not first or first[0]["index"] != 0:
                raise Failed(f"{log.origin} serves no first entry")
            entry = first[0]["entry"]
            where = f"the first entry of {log.origin}"
            if entry.get("type") != RESTART or entry.get("previous_origin") != previous.origin:
                raise Failed(f"{where} is not a restart entry naming {previous.origin}")
            if reading.included(entry, reading.trusted) != 0:
                raise Failed(f"{where} is not at index 0 of its log")
            try:
                noted = self.checkpoint(str(entry.get("previous_checkpoint")))
            except Failed as failure:
                raise Failed(
                    f"{where}: its previous checkpoint is not signed by the site key ({failure})"
                ) from None
            if noted.origin != previous.origin:
                raise Failed(f"{where}: its previous checkpoint is of {noted.origin}")
            if self.witnesses and not self.quorate(noted):
                raise Failed(
                    f"{where}: its previous checkpoint carries {len(noted.cosigned)} of the "
                    f"{self.quorum} cosignatures required"
                )
            lost_from = entry.get("lost_from")
            if not isinstance(lost_from, int) or lost_from < 0:
                raise Failed(f"{where}: lost_from is not an index")
            largest = self._previous_agrees(previous, noted)
            lost_to = max(largest.size, lost_from)
            self.restarts.append(Restart(previous, largest, lost_from, lost_to))
            if lost_to > lost_from:
                print(
                    f"LOST  the site restarted its log as {log.origin}: entries {lost_from} to "
                    f"{lost_to - 1} of {previous.origin} (lost_from {lost_from}, its tree of "
                    f"{lost_to} entries) are lost; a receipt for one of them not logged again is "
                    "dropped by the site"
                )

    def _previous_agrees(self, previous: LogServed, noted: Checkpoint) -> Checkpoint:
        """What this verifier kept of the previous log agrees with the restart's checkpoint (the
        same tree, or a proof the site still serves), or with the witnessed checkpoint the old log
        still serves; the larger of the two known trees is returned."""
        kept = self._kept(previous)
        if kept is None or kept.size == noted.size:
            if kept is not None and kept.root != noted.root:
                raise RolledBack(kept, noted, "two different roots for the same tree size")
            return noted
        earlier, later = (kept, noted) if kept.size < noted.size else (noted, kept)
        old = self.on_log(previous, None)
        status, body = self.get(
            f"{previous.path}/proof/consistency", {"first": earlier.size, "second": later.size}
        )
        if status == 200:
            path = [bytes.fromhex(h) for h in json.loads(body)["hashes"]]
            try:
                check_consistency(earlier.size, later.size, earlier.root, later.root, path)
            except Failed as failure:
                raise RolledBack(earlier, later, str(failure)) from None
            return later
        if kept.size > noted.size:
            return kept  # seen witnessed by this verifier: lost all the same
        served = self._served_witnessed(previous)
        if served is None or served.size < kept.size:
            raise Failed(
                f"the checkpoint of {previous.origin} kept before ({kept.size} entries) cannot be "
                f"shown consistent with the restart's ({noted.size} entries)"
            )
        old.consistent(kept, served)
        return later

    def _card_names_them(self, pinned: dict[str, Any], card: dict[str, Any]) -> None:
        missing = [key.split("+", 1)[0] for key in pinned["keys"] if key not in card["keys"]]
        if missing or card["quorum"] < pinned["quorum"]:
            raise Failed(
                f"the site's card names fewer witnesses than pinned (missing: "
                f"{', '.join(missing) or 'none'}; its quorum {card['quorum']}, pinned "
                f"{pinned['quorum']})"
            )

    def _keypers_make_sense(self) -> None:
        names = {witness.name for witness in self.witnesses}
        for keyper in self.keypers:
            if keyper.name not in names:
                raise Failed(
                    f"keyper {keyper.name} is not a pinned witness: nothing verifies its releases"
                )
        if self.keypers and not 1 <= self.keyper_threshold <= len(self.keypers):
            raise Failed(
                f"a threshold of {self.keyper_threshold} among {len(self.keypers)} keypers makes "
                "no sense"
            )

    def keyper_named(self, name: str) -> tuple[int, Keyper] | None:
        """The keyper of that name and its share's index (its place in the site's list, from 1)."""
        for index, keyper in enumerate(self.keypers, start=1):
            if keyper.name == name:
                return index, keyper
        return None

    def witness_named(self, name: str) -> VerifierKey | None:
        return next((witness for witness in self.witnesses if witness.name == name), None)

    def keyper_grace(self) -> tuple[int, bool]:
        """The site's grace for releases (CAIRN_KEYPER_GRACE_S), and whether its card says it."""
        published = self.card_params().get("keyper_grace_s")
        if isinstance(published, int) and published >= 0:
            return published, True
        return DEFAULT_KEYPER_GRACE_S, False

    def keypers_to_seal_to(self) -> tuple[list[Keyper], int]:
        """The pinned keypers and threshold, when the site takes sealed reports (its card lists
        keypers: the same, as checked when they were pinned)."""
        if not card_trust(self.card_params())["keypers"]:
            raise Failed("the site's card lists no keypers: it takes only the plain form")
        return self.keypers, self.keyper_threshold

    def jws_payload(self, token: str) -> bytes:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SecurityWarning)
            try:
                keys = KeySet.import_key_set(cast(KeySetSerialization, self.jwks))
                return jws.deserialize_compact(token, keys, algorithms=["EdDSA"]).payload
            except (JoseError, ValueError) as error:
                raise Failed(
                    f"the signature does not verify with the pinned site key ({error})"
                ) from None

    def checkpoint(self, text: str) -> Checkpoint:
        """A checkpoint whose site signature verifies with a pinned key, with the times of the
        pinned witnesses' cosignatures that verify. A pinned key's signature that fails is an
        error; a checkpoint without the site's signature is refused."""
        try:
            checked = checkpoint_checked(text, site_keys(self.jwks), self.witnesses)
        except NoteError as error:
            raise Failed(str(error)) from None
        body = checked.body
        return Checkpoint(text, body.origin, body.tree_size, body.root, checked.cosigned)

    def quorate(self, checkpoint: Checkpoint) -> bool:
        return len(checkpoint.cosigned) >= self.quorum

    def consistent(self, old: Checkpoint, new: Checkpoint) -> None:
        """`new` extends `old` (or is the same tree); RolledBack when the proof shows it does not,
        Failed when the site serves no proof."""
        path: list[bytes] = []
        if 0 < old.size < new.size:
            proof = self.get_json(
                f"{self.log_path}/proof/consistency", {"first": old.size, "second": new.size}
            )
            path = [bytes.fromhex(h) for h in proof["hashes"]]
        try:
            check_consistency(old.size, new.size, old.root, new.root, path)
        except Failed as failure:
            raise RolledBack(old, new, str(failure)) from None

    def trusted_checkpoint(self, report: Report) -> Checkpoint:
        """The latest checkpoint carrying the pinned quorum, checked against the one kept from
        the last run, and kept in its place. Every command starts here."""
        status, body = self.get(f"{self.log_path}/checkpoint")
        if status != 200:
            raise Failed(f"the log has no checkpoint to check ({status})")
        latest = self.checkpoint(body.decode())
        kept_file = self.home / self.logs[-1].kept_name
        kept = (
            self.checkpoint(kept_file.read_text(encoding="utf-8")) if kept_file.is_file() else None
        )
        if kept is not None:
            self.consistent(kept, latest)  # a rollback explains whatever fails after it
        trusted = latest
        if not self.witnesses:
            report.note(NO_WITNESSES)
        elif not self.quorate(latest):
            report.note(
                f"the latest checkpoint ({latest.size} entries) carries {len(latest.cosigned)} of "
                f"the {self.quorum} cosignatures required"
            )
            quorate = self._latest_quorate(latest)
            report.note(
                f"{latest.size - (quorate.size if quorate else 0)} entries are not yet witnessed"
            )
            self._unwitnessed_are_recent(quorate.size if quorate else 0, latest.size)
            if quorate is None:
                raise Failed("no checkpoint of the log carries the witness quorum yet")
            trusted = quorate
        if kept is not None:
            if kept.size > trusted.size:  # what was kept carried the quorum too
                raise Failed(
                    f"the site serves as witnessed a tree of {trusted.size} entries, older than "
                    f"the witnessed one of {kept.size} kept before"
                )
            self.consistent(kept, trusted)
            print(f"ok    the log of {trusted.size} entries extends the {kept.size} kept before")
        if kept is None or kept.size < trusted.size:
            self.home.mkdir(parents=True, exist_ok=True)
            kept_file.write_text(trusted.text, encoding="utf-8")
        self.trusted = trusted
        self.restarts_checked(report, trusted)
        return trusted

    def _latest_quorate(self, latest: Checkpoint) -> Checkpoint | None:
        if latest.size == 0:
            return None
        status, body = self.get(f"{self.log_path}/checkpoints", {"covering": 0})
        if status == 404:
            return None
        if status != 200:
            raise Failed(f"{self.log_path}/checkpoints answered {status}")
        found = self.checkpoint(json.loads(body)["checkpoints"][-1])
        if not self.quorate(found):
            raise Failed(
                f"the site served the checkpoint of size {found.size} as witnessed; it is not"
            )
        self.consistent(found, latest)
        return found

    def _unwitnessed_are_recent(self, start: int, end: int) -> None:
        """Entries past the witnessed tree must still be within their merge delay."""
        now = datetime.now(UTC)
        for item in self.get_json(f"{self.log_path}/entries", {"start": start, "end": end})[
            "entries"
        ]:
            at = entry_time(item["entry"])
            if at is not None and at + MAX_MERGE_DELAY < now:
                raise Failed(
                    f"{describe(item['entry'])} (entry {item['index']}, of {at:%Y-%m-%dT%H:%M:%S}Z) "
                    "should be under a witnessed checkpoint by now and is not"
                )

    def included(self, entry: dict[str, Any], checkpoint: Checkpoint) -> int:
        """The entry's index once its inclusion under the checkpoint is proven; Failed otherwise."""
        leaf = leaf_hash(canonical_json(entry))
        status, body = self.get(
            f"{self.log_path}/proof/inclusion",
            {"leaf_hash": leaf.hex(), "tree_size": checkpoint.size},
        )
        if status == 404:
            raise Failed(
                f"{describe(entry)} is not in the log under the checkpoint of size {checkpoint.size}"
            )
        if status != 200:
            raise Failed(f"the inclusion proof for {describe(entry)} answered {status}")
        proof = json.loads(body)
        path = [bytes.fromhex(h) for h in proof["hashes"]]
        if not inclusion_verify(proof["index"], checkpoint.size, leaf, path, checkpoint.root):
            raise Failed(
                f"the inclusion proof of {describe(entry)} does not lead to the signed root"
            )
        return int(proof["index"])

    def witnessed_in_time(self, index: int, entry: dict[str, Any]) -> str:
        """The entry was under a witnessed checkpoint within the merge delay of its own time
        (§15.2): the earliest quorate checkpoint holding it says when a quorum saw it."""
        at = entry_time(entry)
        assert at is not None and self.trusted is not None
        status, body = self.get(f"{self.log_path}/checkpoints", {"covering": index})
        if status == 404:
            raise Failed(f"{describe(entry)} is under no witnessed checkpoint")
        if status != 200:
            raise Failed(f"{self.log_path}/checkpoints answered {status}")
        earliest = self.checkpoint(json.loads(body)["checkpoints"][0])
        if earliest.size <= index or not self.quorate(earliest):
            raise Failed(f"the checkpoint served as witnessing entry {index} does not hold it")
        self.consistent(earliest, self.trusted)
        witnessed = earliest.witnessed_at(self.quorum)
        assert witnessed is not None
        late = witnessed - (at + MAX_MERGE_DELAY).timestamp()
        if late >= 1:
            raise Failed(
                f"{describe(entry)} says {format_time(at)}, but a quorum of witnesses first saw "
                f"it at {datetime.fromtimestamp(witnessed, UTC):%Y-%m-%dT%H:%M:%S}Z, "
                f"{late + 60:.0f} s later: it was inserted late and back-dated"
            )
        return f"witnessed {max(0.0, late + 60):.0f} s after its time"

    def entries(self, start: int, end: int) -> Iterator[tuple[int, bytes]]:
        """Entries [start, end) as their exact bytes, a bundle at a time: from the tiles' entry
        bundles, or from /api/log/entries where a site serves no tiles. Failed, when the bundles
        do not hold exactly these, at the first one out of place."""
        expected, tile = start, start // 256
        while tile * 256 < end:
            width = min(256, end - tile * 256)
            path = f"{self.log_path}/tile/entries/{tile_path(tile)}" + (
                f".p/{width}" if width < 256 else ""
            )
            status, body = self.get(path)
            if status == 404 and expected == start and tile == start // 256:
                yield from self._entries_by_page(start, end)
                return
            if status != 200:
                raise Failed(f"{path} answered {status}")
            for offset, entry in enumerate(bundle_entries(body)):
                index = tile * 256 + offset
                if start <= index < end:
                    if index != expected:
                        raise Failed(
                            f"the entry bundles do not hold exactly entries {start} to {end - 1}"
                        )
                    expected += 1
                    yield index, entry
            tile += 1
        if expected != end:
            raise Failed(f"the entry bundles do not hold exactly entries {start} to {end - 1}")

    def _entries_by_page(self, start: int, end: int) -> Iterator[tuple[int, bytes]]:
        while start < end:
            page = self.get_json(f"{self.log_path}/entries", {"start": start, "end": end})[
                "entries"
            ]
            if not page:
                raise Failed(f"{self.log_path}/entries served nothing from entry {start}")
            for item in page:
                yield item["index"], canonical_json(item["entry"])
            start = page[-1]["index"] + 1

    def keyper_checkpoint_size(self, name: str, origin: str) -> int:
        """The size of the latest checkpoint of this log that the keyper cosigned, as its witness
        serves it: the tree its release's proofs must lead to."""
        url = self.witness_urls.get(name)
        if not url:
            raise Failed(f"no URL is pinned for witness {name}")
        cosigned = KeyperCheckpoint(url, origin)
        status, body = http_get(cosigned.url)
        if status != 200:
            raise Failed(f"{cosigned.url} answered {status}")
        size = cosigned.size(body.decode(errors="replace"))
        if size is None:
            raise Failed(f"{cosigned.url} is not a checkpoint of {origin}")
        return size

    def keyper_size(self, name: str, log: Site) -> int:
        """The tree of `log` (this site read through one of its logs) a release of keyper
        `name` is proven against: the checkpoint this verifier trusts for that log when the
        keyper cosigned it, else the latest the keyper cosigned, which for a log the site
        restarted may be a tree the site lost and can no longer prove against."""
        trusted, witness = log.trusted, self.witness_named(name)
        assert trusted is not None
        if witness is not None and witness.text in trusted.cosigned:
            return trusted.size
        return self.keyper_checkpoint_size(name, trusted.origin)

    def entry_proof(self, index: int, entry: dict[str, Any], size: int) -> EntryProven:
        """An entry as a release request carries it: its index, JCS text and audit path to the
        tree of `size` entries of this log, which the site serves."""
        assert self.trusted is not None
        text = canonical_json(entry)
        proof = self.get_json(
            f"{self.log_path}/proof/inclusion",
            {"leaf_hash": leaf_hash(text).hex(), "tree_size": size},
        )
        if proof["index"] != index:
            raise Failed(
                f"the site proves {describe(entry)} at index {proof['index']}, not {index}"
            )
        return EntryProven(self.trusted.origin, size, index, text.decode(), proof["hashes"])

    def release_ask(self, sealed: Sealed, share: dict[str, Any]) -> dict[str, Any]:
        """The keyper's release of one sealed share, asked with the proofs the site serves, each
        entry in the log that holds it, for a tree of it the keyper cosigned (§15.8); Failed
        when it gives none."""
        found = self.keyper_named(str(share.get("keyper")))
        if found is None:
            raise Failed(f"{share.get('keyper')} is not a pinned keyper")
        _, keyper = found
        task_log, contribution_log = sealed.task_log, sealed.contribution_log
        size = self.keyper_size(keyper.name, task_log)
        later = (
            size
            if contribution_log.log_path == task_log.log_path
            else self.keyper_size(keyper.name, contribution_log)
        )
        body = release_request(
            share,
            task_id=sealed.task_id,
            contribution_id=sealed.contribution_id,
            threshold=sealed.threshold,
            ciphertext_digest=sealed.ciphertext_digest,
            task_entry=task_log.entry_proof(*sealed.task_entry, size),
            contribution_entry=contribution_log.entry_proof(*sealed.contribution_entry, later),
        )
        status, answer = http_post_json(f"{keyper.url.rstrip('/')}/release", body)
        if status != 200:
            raise Failed(
                f"keyper {keyper.name} answered {status}: {answer[:200].decode(errors='replace')}"
            )
        release = json.loads(answer)
        return {
            "keyper": release.get("keyper"),
            "index": share["index"],
            "share": release.get("share"),
            "released_at": release.get("released_at"),
            "signature": release.get("signature"),
        }


def http_get(url: str) -> tuple[int, bytes]:
    return _http(urllib.request.Request(url))


def http_post_json(url: str, body: Any) -> tuple[int, bytes]:
    return _http(
        urllib.request.Request(
            url,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
    )


def _http(request: urllib.request.Request) -> tuple[int, bytes]:
    """The status and body of any answer; Failed when nothing answers."""
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError as error:
        raise Failed(f"cannot reach {request.full_url}: {error}") from None


def _witnesses_file(path: Path) -> dict[str, Any]:
    """The trust a --witnesses file pins, in the form it is pinned in."""
    keys: list[str] = []
    urls: dict[str, str] = {}
    keypers: list[dict[str, str]] = []
    quorum = threshold = None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0] == "quorum" and len(words) == 2 and words[1].isdigit():
            quorum = int(words[1])
        elif words[0] == "keyper_threshold" and len(words) == 2 and words[1].isdigit():
            threshold = int(words[1])
        elif words[0] == "keyper" and len(words) == 4:
            keypers.append({"name": words[1], "hpke_key": words[2], "url": words[3]})
        elif len(words) <= 2 and "+" in words[0]:
            keys.append(words[0])
            if len(words) == 2:
                urls[words[0].split("+", 1)[0]] = words[1]
        else:
            raise Failed(f"{path}, line {number}: not a witness, quorum, keyper or threshold")
    if keypers and threshold is None:
        threshold = len(keypers) // 2 + 1
    return {
        "keys": keys,
        "quorum": len(keys) if quorum is None else quorum,
        "urls": urls,
        "keypers": keypers,
        "keyper_threshold": threshold or 0,
    }


def _same_keypers(pinned: dict[str, Any], card: dict[str, Any], where: Path) -> None:
    """A card naming other keypers (by name and key, in their order) or another threshold than
    those pinned fails: sealing to them would trust parties nobody pinned."""
    if keypers_differ(pinned, card):
        raise Failed(
            f"the site's card names other keypers or another threshold than pinned in {where} "
            f"(the card: {', '.join(k['name'] for k in card['keypers'])}, threshold "
            f"{card['keyper_threshold']}; pinned: {', '.join(k['name'] for k in pinned['keypers'])}, threshold "
            f"{pinned['keyper_threshold']}); if the site's operator confirms the change, remove "
            "that file to pin the card's"
        )


def tile_path(index: int) -> str:
    """C2SP tlog-tiles: 1234067 → x001/x234/067."""
    groups = []
    while True:
        groups.append(f"{index % 1000:03d}")
        index //= 1000
        if index == 0:
            break
    return "/".join([f"x{g}" for g in reversed(groups[1:])] + [groups[0]])


def bundle_entries(body: bytes) -> list[bytes]:
    entries, at = [], 0
    while at < len(body):
        if at + 2 > len(body):
            raise Failed("an entry bundle ends inside a length")
        length = int.from_bytes(body[at : at + 2], "big")
        if at + 2 + length > len(body):
            raise Failed("an entry bundle ends inside an entry")
        entries.append(body[at + 2 : at + 2 + length])
        at += 2 + length
    return entries


def describe(entry: dict[str, Any]) -> str:
    kind = str(entry.get("type", "unknown")).rsplit("/", 1)[-1]
    name = entry.get("contribution_id") or entry.get("task_id", "?")
    return f"the {kind} entry of {name}"


def instant(text: str) -> datetime:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    except (TypeError, ValueError):
        raise Failed(f"{text!r} is not an instant") from None


def format_time(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def entry_time(entry: dict[str, Any]) -> datetime | None:
    for name in ("received_at", "created_at", "evaluated_at"):
        if name in entry:
            return instant(entry[name])
    return None


def item_entry(view: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """The contribution entry an evaluation item says the log holds: by the contributor's
    commitment for a keyper-sealed one, else by what its digest and salt make."""
    return contribution_entry(
        task_id=view["id"],
        contribution_id=item["contribution_id"],
        report_digest=item.get("report_digest", ""),
        salt=item.get("salt"),
        keyper_commitment=item["commitment"] if "sealed" in item else None,
        received_at=item["received_at"],
    )


# --- The log's rules (§15.3) -------------------------------------------------------------------


class TaskLogged:
    """What the log's rules keep of one task, between its entries and between runs: its task
    entry's index and leaf hash, its deadline, its contributions' indexes and leaf hashes in log
    order, its evaluation's. The hashes stand for the entries, whose parsed form costs ten times
    more: its evaluation is checked against entries rebuilt from what it publishes (or served
    again), whose leaf hashes must be these. Once its evaluation is checked, `leaf` and
    `contributions` are None: later entries of the task need only its deadline and indexes."""

    __slots__ = ("contributions", "deadline", "evaluation", "index", "leaf")

    def __init__(
        self,
        index: int,
        deadline: Any,
        leaf: bytes | None,
        contributions: bytearray | None,
        evaluation: tuple[int, bytes | None] | None = None,
    ) -> None:
        self.index, self.deadline, self.leaf = index, deadline, leaf
        self.contributions = contributions  # each its index (8 bytes) then its leaf hash
        self.evaluation = evaluation

    def logged(self) -> list[tuple[int, bytes]]:
        """The contributions logged, (index, leaf hash) in log order."""
        packed = self.contributions or b""
        return [
            (int.from_bytes(packed[at : at + 8], "big"), bytes(packed[at + 8 : at + 40]))
            for at in range(0, len(packed), 40)
        ]

    def checked(self) -> None:
        if self.evaluation is not None:
            self.leaf, self.contributions = None, None
            self.evaluation = (self.evaluation[0], None)

    def saved(self) -> list[Any]:
        at, leaf = self.evaluation if self.evaluation is not None else (None, None)
        deadline = self.deadline
        return [
            self.index,
            deadline.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            if isinstance(deadline, datetime)
            else deadline,
            self.leaf.hex() if self.leaf is not None else None,
            base64.b64encode(self.contributions).decode()
            if self.contributions is not None
            else None,
            at,
            leaf.hex() if leaf is not None else None,
        ]

    @classmethod
    def loaded(cls, saved: list[Any]) -> TaskLogged:
        index, deadline, leaf, contributions, at, evaluation_leaf = saved
        return cls(
            index,
            _instant_or_as_is(deadline),
            bytes.fromhex(leaf) if leaf is not None else None,
            bytearray(base64.b64decode(contributions)) if contributions is not None else None,
            (at, bytes.fromhex(evaluation_leaf) if evaluation_leaf is not None else None)
            if at is not None
            else None,
        )

    @classmethod
    def from_entries(cls, task: dict[str, Any]) -> TaskLogged:
        """A task as a monitor that kept every entry parsed saved it."""
        entry = task["entry"]
        logged = cls(
            task["index"], _instant_or_as_is(entry.get("deadline")), _jcs_leaf(entry), bytearray()
        )
        for contribution in task["contributions"]:
            logged.add(contribution["index"], _jcs_leaf(contribution["entry"]))
        if task["evaluation"] is not None:
            logged.evaluation = (
                task["evaluation"]["index"],
                _jcs_leaf(task["evaluation"]["entry"]),
            )
        return logged

    def add(self, index: int, leaf: bytes) -> None:
        if self.contributions is not None:
            self.contributions += index.to_bytes(8, "big") + leaf


def _instant_or_as_is(value: Any) -> Any:
    """A deadline parsed once for all its task's entries; one that is not an instant is kept as
    it is, to fail as such when an entry is held to it."""
    try:
        return instant(value)
    except Failed:
        return value


def _jcs_leaf(entry: Any) -> bytes:
    return leaf_hash(canonical_json(entry))


def _id_key(text: str) -> int | str:
    """A contribution id as the rules remember it: a UUID in its canonical form as its 128-bit
    number (half the memory of its text), anything else as its text."""
    if len(text) == 36:
        with contextlib.suppress(ValueError):
            number = uuid.UUID(text)
            if str(number) == text:
                return number.int
    return text


class LogRules:
    """The log's rules, applied entry by entry in log order. Its state is what the monitor keeps
    between runs: what `TaskLogged` keeps of each task, and every contribution id logged (one
    logged twice breaks the rules however far apart, under whichever tasks)."""

    def __init__(self) -> None:
        self.tasks: dict[str, TaskLogged] = {}
        self.contributions: set[int | str] = set()

    @classmethod
    def loaded(cls, saved: dict[str, Any] | None, version: int) -> LogRules:
        """The state `saved_json` wrote (version 2), or the one a monitor that kept every entry
        parsed wrote (version 1: each task an object of its entries, the contributions an object
        of ids), read alike, its evaluated tasks as checked: it was saved only when all held."""
        rules = cls()
        if not saved:
            return rules
        for task_id, task in saved["tasks"].items():
            if version < 2:
                rules.tasks[task_id] = TaskLogged.from_entries(task)
                rules.tasks[task_id].checked()
            else:
                rules.tasks[task_id] = TaskLogged.loaded(task)
        contributions = saved["contributions"]
        if version >= 2:
            packed = base64.b64decode(contributions["uuids"])
            rules.contributions = {
                int.from_bytes(packed[at : at + 16], "big") for at in range(0, len(packed), 16)
            }
            rules.contributions.update(contributions["others"])
        else:
            rules.contributions = {_id_key(c) for c in contributions}
        return rules

    def saved_json(self) -> Iterable[str]:
        """The state as JSON text, a task at a time, so that saving it holds no second copy."""
        yield '{"tasks":{'
        for n, (task_id, task) in enumerate(self.tasks.items()):
            yield ("," if n else "") + json.dumps(task_id) + ":" + json.dumps(task.saved())
        yield '},"contributions":{"uuids":"'
        numbers = (c.to_bytes(16, "big") for c in self.contributions if isinstance(c, int))
        while chunk := b"".join(itertools.islice(numbers, 3 * 4096)):
            yield base64.b64encode(chunk).decode()  # 48 KiB, a multiple of 3: no padding inside
        others = sorted(c for c in self.contributions if isinstance(c, str))
        yield '","others":' + json.dumps(others) + "}}"

    def apply(self, index: int, entry: dict[str, Any], leaf: bytes) -> list[str]:
        """The rules broken by `entry`, at `index`, whose canonical form hashes to `leaf`."""
        kind, task_id = entry.get("type"), str(entry.get("task_id"))
        task = self.tasks.get(task_id)
        where = f"entry {index} ({describe(entry)})"
        if kind == TASK:
            if task is not None:
                return [f"{where}: a second task entry for task {task_id}"]
            deadline = _instant_or_as_is(entry.get("deadline"))
            self.tasks[task_id] = TaskLogged(index, deadline, leaf, bytearray())
            return []
        if kind not in (CONTRIBUTION, EVALUATION):
            return []
        if task is None:
            return [f"{where} comes before any task entry of task {task_id}"]
        deadline = task.deadline
        if not isinstance(deadline, datetime):
            deadline = instant(deadline)
        if kind == CONTRIBUTION:
            problems = []
            contribution_id = str(entry.get("contribution_id"))
            key = _id_key(contribution_id)
            if key in self.contributions:
                problems.append(f"{where}: contribution {contribution_id} is logged twice")
            if task.evaluation is not None:
                problems.append(f"{where} comes after the task's evaluation entry")
            if instant(entry["received_at"]) > deadline:
                problems.append(f"{where} was received after the task's deadline")
            self.contributions.add(key)
            task.add(index, leaf)
            return problems
        if task.evaluation is not None:
            return [
                f"{where}: a second evaluation entry for task {task_id} (the first is entry "
                f"{task.evaluation[0]})"
            ]
        task.evaluation = (index, leaf)
        if instant(entry["evaluated_at"]) < deadline:
            return [f"{where}: the task was evaluated before its deadline"]
        return []

    def logged(self, task_id: str, entries: Iterable[tuple[int, Any]]) -> dict[str, Any] | None:
        """The task's logged entries as `evaluation_problems` reads them, taken from `entries`
        ((index, entry) pairs, as the site serves them): None when no task entry was logged;
        Failed when one of them is missing or is not the entry logged at its index."""
        task = self.tasks.get(task_id)
        if task is None:
            return None
        if task.leaf is None:
            raise Failed("its evaluation was checked before, and its entries are no longer kept")
        served = dict(entries)

        def at(index: int, leaf: bytes | None) -> dict[str, Any]:
            entry = served.get(index)
            if entry is None or _jcs_leaf(entry) != leaf:
                raise Failed(
                    f"the site does not serve entry {index} of the task as its log holds it"
                )
            return cast(dict[str, Any], entry)

        evaluation = task.evaluation
        return {
            "index": task.index,
            "entry": at(task.index, task.leaf),
            "contributions": [{"index": i, "entry": at(i, leaf)} for i, leaf in task.logged()],
            "evaluation": None
            if evaluation is None
            else {"index": evaluation[0], "entry": at(*evaluation)},
        }

    def logged_as_published(self, task_id: str, view: dict[str, Any]) -> dict[str, Any] | None:
        """The task's logged entries when the evaluated view publishes exactly these (leaf hash
        for leaf hash, in log order), as `logged` gives them; None when anything differs, to be
        told apart with the entries the site serves."""
        task = self.tasks.get(task_id)
        if task is None or task.leaf is None or task.evaluation is None:
            return None
        try:
            published = _published_contributions(view)
            logged_task, evaluation = task_entry(view), evaluation_entry(view)
        except (KeyError, TypeError, AttributeError):
            return None
        logged = task.logged()
        if (
            _jcs_leaf(logged_task) != task.leaf
            or _jcs_leaf(evaluation) != task.evaluation[1]
            or [leaf for _, leaf in logged] != [_jcs_leaf(entry) for entry in published]
        ):
            return None
        return {
            "index": task.index,
            "entry": logged_task,
            "contributions": [
                {"index": i, "entry": entry}
                for (i, _), entry in zip(logged, published, strict=True)
            ],
            "evaluation": {"index": task.evaluation[0], "entry": evaluation},
        }


def _published_contributions(view: dict[str, Any]) -> list[dict[str, Any]]:
    """The contribution entries the evaluation's items make, in its order."""
    return [item_entry(view, item) for item in view["evaluation"]["contributions"]]


def evaluation_problems(
    view: dict[str, Any], logged: dict[str, Any], waiting: Waiting | None = None
) -> list[str]:
    """The task's public evaluation against its logged entries: the task entry, exactly the
    logged contributions (ids, commitments, received_at, in log order), the evaluation entry.
    With `waiting`, an entry not logged yet whose merge delay still runs goes there instead."""
    problems = []
    if logged["entry"] != task_entry(view):
        problems.append("the task's entry in the log differs from the task as published")
    evaluation = view.get("evaluation")
    if evaluation is None:
        if logged["evaluation"] is not None:
            problems.append("the log holds an evaluation entry for a task published as open")
        return problems
    published = _published_contributions(view)
    in_log = [c["entry"] for c in logged["contributions"]]
    logged_ids = {e["contribution_id"]: e for e in in_log}
    published_ids = {e["contribution_id"]: e for e in published}
    for contribution_id, entry in logged_ids.items():
        if contribution_id not in published_ids:
            problems.append(f"the evaluation leaves out logged contribution {contribution_id}")
        elif published_ids[contribution_id] != entry:
            fields = [k for k in entry if entry[k] != published_ids[contribution_id].get(k)]
            problems.append(
                f"the evaluation shows contribution {contribution_id} with another "
                f"{' and '.join(fields)} than the log"
            )
    unlogged = [e for i, e in published_ids.items() if i not in logged_ids]
    for entry in unlogged:
        if waiting is None or not waiting.still(entry):
            problems.append(
                f"the evaluation counts contribution {entry['contribution_id']}, which is not "
                "logged"
            )
    if not problems and not unlogged and published != in_log:
        problems.append("the evaluation lists its contributions in another order than received")
    expected = evaluation_entry(view)
    if logged["evaluation"] is None:
        if waiting is None or not waiting.still(expected):
            problems.append("the task's evaluation entry is not in the log")
    elif logged["evaluation"]["entry"] != expected:
        problems.append("the published evaluation differs from the one its log entry commits to")
    return problems


# --- Keyper-sealed contributions (§15.8) --------------------------------------------------------

RULE_VOIDS = ("unknown_schema", "invalid_payload", "source_not_in_task")
SALT_BYTES = 32


@dataclass(frozen=True)
class Sealed:
    """One keyper-sealed contribution as the log binds it: what its shares were sealed for and
    what a release request names. Each entry is indexed in the log that holds it, the site read
    through that log: the task's, whose origin the shares are bound to, and the contribution's,
    the same or, after a restart (§16.2), a later one."""

    origin: str
    task_id: str
    contribution_id: str
    deadline: str
    sources: list[str]  # the task's, which an opened report's evidence must cite
    threshold: int
    ciphertext_digest: str
    task_entry: tuple[int, dict[str, Any]]
    contribution_entry: tuple[int, dict[str, Any]]
    task_log: Site
    contribution_log: Site

    @property
    def not_before(self) -> datetime:
        """No keyper releases before the deadline + 60 s, by its own clock."""
        return instant(self.deadline) + MAX_MERGE_DELAY


def release_problem(site: Site, sealed: Sealed, release: Any) -> str | None:
    """What is wrong with a release, or None when a pinned keyper signed it, for this
    contribution and its own index, at or after the deadline + 60 s."""
    if not isinstance(release, dict):
        return "a release that is not an object"
    name = str(release.get("keyper"))
    found = site.keyper_named(name)
    witness = site.witness_named(name)
    if found is None or witness is None:
        return f"a release by {name}, who is not a pinned keyper"
    if release.get("index") != found[0]:
        return (
            f"the release by {name} carries index {release.get('index')}, its share is {found[0]}"
        )
    try:
        share = b64u_decode(release["share"])
        released_at = instant(release["released_at"])
    except (KeyError, ValueError, Failed):
        return f"the release by {name} has no share or time"
    claims = release_claims(
        keyper=name,
        site=sealed.origin,
        task_id=sealed.task_id,
        contribution_id=sealed.contribution_id,
        index=found[0],
        share=release["share"],
        released_at=release["released_at"],
    )
    public = Ed25519PublicKey.from_public_bytes(witness.public)
    if not release_verify(claims, str(release.get("signature")), public):
        return f"the release by {name} is not signed by its pinned witness key"
    if len(share) != KEY_BYTES:
        return f"the release by {name} holds a share of {len(share)} bytes"
    if released_at < sealed.not_before:
        return (
            f"keyper {name} released at {release['released_at']}, before the deadline + 60 s "
            f"({format_time(sealed.not_before)})"
        )
    return None


def _shares(releases: list[dict[str, Any]]) -> list[tuple[int, bytes]]:
    return [(release["index"], b64u_decode(release["share"])) for release in releases]


def _key(sealed: Sealed, releases: list[dict[str, Any]]) -> bytes:
    """The key the releases give; SealError when fewer than k, or when they disagree."""
    return key_combine(_shares(releases), sealed.threshold)


def _opened(sealed: Sealed, ciphertext: bytes, key: bytes) -> tuple[Any, str]:
    """The report and salt sealed under `key`; SealError when it does not open to them, or to a
    salt that is not 32 random bytes (§15.2), which the site voids as invalid_payload too."""
    report, salt = report_open(
        ciphertext,
        key,
        site=sealed.origin,
        task_id=sealed.task_id,
        deadline=sealed.deadline,
        commitment=sealed.contribution_entry[1]["commitment"],
    )
    try:
        salt_bytes = len(b64u_decode(salt))
    except ValueError:
        salt_bytes = 0
    if salt_bytes != SALT_BYTES:
        raise SealError(f"salt: must be {SALT_BYTES} random bytes, base64url without padding")
    return report, salt


def sealed_of(
    site: Site,
    view: dict[str, Any],
    logged: dict[str, Any],
    item: dict[str, Any],
    chain: list[tuple[Site, int, int]],
) -> Sealed:
    """The contribution's seal as its log entries bind it: Failed when it is not logged.
    `logged` is indexed across `chain` (as `chain_read` gives it)."""
    entries = [
        c
        for c in logged["contributions"]
        if c["entry"]["contribution_id"] == item["contribution_id"]
    ]
    if not entries or "commitment" not in entries[0]["entry"]:
        raise Failed("it is not logged with a commitment")
    sealed = item.get("sealed", {})
    task_log, task_index = chain_place(chain, logged["index"])
    contribution_log, contribution_index = chain_place(chain, entries[0]["index"])
    assert task_log.trusted is not None
    return Sealed(
        origin=task_log.trusted.origin,
        task_id=view["id"],
        contribution_id=item["contribution_id"],
        deadline=logged["entry"]["deadline"],
        sources=view["sources"],
        threshold=sealed.get("threshold", site.keyper_threshold),
        ciphertext_digest=sealed.get("ciphertext_digest", ""),
        task_entry=(task_index, logged["entry"]),
        contribution_entry=(contribution_index, entries[0]["entry"]),
        task_log=task_log,
        contribution_log=contribution_log,
    )


class Releases:
    """The releases of one sealed contribution that hold, by keyper, and what is wrong with the
    others."""

    def __init__(self, site: Site, sealed: Sealed) -> None:
        self.site, self.sealed = site, sealed
        self.valid: dict[str, dict[str, Any]] = {}
        self.problems: list[str] = []

    def add(self, releases: Iterable[Any]) -> Releases:
        for release in releases:
            problem = release_problem(self.site, self.sealed, release)
            if problem:
                self.problems.append(problem)
            else:
                self.valid.setdefault(release["keyper"], release)
        return self

    def ask(self, shares: list[dict[str, Any]]) -> list[str]:
        """Asks each keyper not released yet; what the keypers that gave none answered."""
        answers = []
        for share in shares:
            if share.get("keyper") in self.valid:
                continue
            try:
                release = self.site.release_ask(self.sealed, share)
            except (Failed, ValueError, KeyError) as error:
                answers.append(str(error))
                continue
            problem = release_problem(self.site, self.sealed, release)
            if problem:
                answers.append(problem)
            else:
                self.valid[release["keyper"]] = release
        return answers

    def by(self, end: datetime | None = None) -> list[dict[str, Any]]:
        """The valid releases made by `end` (all of them without one), in index order."""
        return sorted(
            (r for r in self.valid.values() if end is None or instant(r["released_at"]) <= end),
            key=lambda release: release["index"],
        )


def grace_end(site: Site, report: Report, sealed: Sealed) -> datetime:
    """When the site stops waiting for releases and may void a report as keys_unavailable."""
    grace, published = site.keyper_grace()
    if not published:
        report.note(
            f"the site's card does not say how long it waits for the keypers' releases: "
            f"{grace} s (the default) is assumed, so only releases made within the deadline + "
            f"{60 + grace} s disprove a keys_unavailable"
        )
    return sealed.not_before + timedelta(seconds=grace)


def sealed_item_check(site: Site, report: Report, sealed: Sealed, item: dict[str, Any]) -> str:
    """One sealed item of an evaluation (§15.8 "The verifier"): its releases, its opening and,
    when void, that the void follows the rules. Failed naming what does not hold."""
    body = item["sealed"]
    void = item.get("void")
    code = void.get("code") if isinstance(void, dict) else None
    if code == "private_content":
        if {"ciphertext", "releases", "shares"} & set(body) or {"report", "salt"} & set(item):
            raise Failed("void as private_content, it still publishes what opens it")
        report.note(
            f"contribution {sealed.contribution_id} is void as private_content: without its "
            "plaintext this cannot be checked (its contributor can, with `dispute`)"
        )
        return "void as private_content"
    if sealed.threshold != site.keyper_threshold:
        raise Failed(
            f"it was sealed for a threshold of {sealed.threshold}; the pinned one is "
            f"{site.keyper_threshold}"
        )
    try:
        ciphertext = b64u_decode(body["ciphertext"])
    except (KeyError, ValueError):
        raise Failed("it publishes no ciphertext") from None
    if ciphertext_digest(ciphertext) != sealed.ciphertext_digest:
        raise Failed("its ciphertext's digest is not its ciphertext_digest")
    releases = Releases(site, sealed).add(body.get("releases", []))
    if releases.problems:
        raise Failed("; ".join(releases.problems))
    if code is None:
        return _counted_check(sealed, ciphertext, releases.by(), item)
    if code == KEYS_UNAVAILABLE:
        fault, found, _ = keys_in_time(site, report, sealed, releases, body.get("shares"))
        if fault == INCONSISTENT_SHARES:
            raise Failed(f"void as keys_unavailable, yet {found}, which disagree: {fault}")
        if fault:
            raise Failed(f"WRONGFUL VOID: void as keys_unavailable, yet {found}")
        return f"void as keys_unavailable: {found}"
    if code == INCONSISTENT_SHARES:
        if len(releases.valid) <= sealed.threshold:
            raise Failed(
                f"void as inconsistent_shares, but with {len(releases.valid)} signed releases "
                f"(threshold {sealed.threshold}) no disagreement can show"
            )
        try:
            _key(sealed, releases.by())
        except SealError:
            return "void as inconsistent_shares: its signed releases disagree"
        raise Failed("void as inconsistent_shares, but its signed releases agree on one key")
    if code in RULE_VOIDS:
        try:
            key = _key(sealed, releases.by())
        except SealError as error:
            raise Failed(f"void as {code}, but {error}") from None
        try:
            opened, _ = _opened(sealed, ciphertext, key)
        except SealError as error:
            if code == "invalid_payload":
                return f"void as invalid_payload: {error}"
            raise Failed(f"void as {code}, but {error}") from None
        broken, _ = report_rules(opened, sealed.sources)
        if broken == code:
            return f"void as {code}: the opened report breaks that rule"
        if not broken:
            raise Failed(f"WRONGFUL VOID: void as {code}, and the opened report breaks no rule")
        raise Failed(f"void as {code}, but the opened report breaks {broken} first")
    raise Failed(f"void with an unknown code {code!r}")


def _counted_check(
    sealed: Sealed,
    ciphertext: bytes,
    releases: list[dict[str, Any]],
    item: dict[str, Any],
) -> str:
    try:
        opened, salt = _opened(sealed, ciphertext, _key(sealed, releases))
    except SealError as error:
        raise Failed(f"counted, but {error}") from None
    if (item.get("report"), item.get("salt")) != (opened, salt):
        raise Failed("the published report or salt is not the one its releases open")
    if item.get("report_digest") != canonical_digest(opened):
        raise Failed("its report_digest is not the opened report's")
    broken, _ = report_rules(opened, sealed.sources)
    if broken:
        raise Failed(f"counted, but the opened report breaks {broken}")
    return f"opens with {len(releases)} signed releases to the published report"


def keys_in_time(
    site: Site, report: Report, sealed: Sealed, releases: Releases, shares: Any
) -> tuple[str | None, str, list[dict[str, Any]]]:
    """What the releases made within the site's grace show of a keys_unavailable void, the keypers
    asked for `shares` when too few were published: "wrongful" when enough agree on the key,
    "inconsistent_shares" when enough disagree, None when too few; what was found; the releases."""
    end = grace_end(site, report, sealed)
    answers: list[str] = []
    if len(releases.by(end)) < sealed.threshold:
        if not isinstance(shares, list):
            raise Failed(
                "void as keys_unavailable, but it publishes no sealed shares to ask the keypers for"
            )
        answers = releases.ask(shares)
    in_time = releases.by(end)
    if len(in_time) < sealed.threshold:
        said = f" ({'; '.join(answers)})" if answers else ""
        needed = f"{len(in_time)} of the {sealed.threshold} releases needed"
        return None, f"{needed} were made by {format_time(end)}{said}", in_time
    made = ", ".join(f"{r['keyper']} at {r['released_at']}" for r in in_time)
    found = f"{len(in_time)} keypers released their shares by {format_time(end)} ({made})"
    try:
        _key(sealed, in_time)
    except SealError:
        return INCONSISTENT_SHARES, found, in_time
    return "wrongful", found, in_time


def sealed_checks(
    report: Report,
    site: Site,
    view: dict[str, Any],
    logged: dict[str, Any] | None,
    chain: list[tuple[Site, int, int]],
) -> None:
    """Every sealed item of the task's evaluation (§15.8 "The verifier"), `logged` indexed
    across the site's `chain` of logs."""
    evaluation = view.get("evaluation")
    if evaluation is None or logged is None:
        return
    for item in evaluation["contributions"]:
        if "sealed" not in item:
            continue

        def check(item: dict[str, Any] = item) -> str:
            sealed = sealed_of(site, view, logged, item, chain)
            return sealed_item_check(site, report, sealed, item)

        report.check(f"keyper-sealed contribution {item['contribution_id']}", check)


# --- The commands ------------------------------------------------------------------------------


class Waiting:
    """Entries not yet under a witnessed checkpoint whose maximum merge delay still runs: not a
    failure yet (§15.5), but nothing to call verified either."""

    def __init__(self) -> None:
        self.until: datetime | None = None

    def still(self, entry: dict[str, Any]) -> bool:
        """Whether the entry's merge delay still runs; if so, it is said to be not yet witnessed."""
        now = datetime.now(UTC)
        due = (entry_time(entry) or now) + MAX_MERGE_DELAY
        if due <= now:
            return False
        print(f"WAIT  {describe(entry)} is not yet witnessed; run again after {format_time(due)}")
        self.until = max(self.until or due, due)
        return True


class Report:
    def __init__(self) -> None:
        self.failures = 0
        self.notes: set[str] = set()
        self.waiting = Waiting()

    def check(self, what: str, run: Any) -> Any:
        try:
            result = run()
        except RolledBack as rollback:
            self.fail(str(rollback))
            return None
        except Failed as failure:
            self.fail(f"{what}: {failure}")
            return None
        print(f"ok    {what}" + (f" ({result})" if isinstance(result, str) else ""))
        return result

    def fail(self, message: str) -> None:
        self.failures += 1
        print(f"FAIL  {message}")

    def note(self, message: str) -> None:
        if message not in self.notes:
            self.notes.add(message)
            print(f"NOTE  {message}")


def first_check(report: Report, site: Site) -> Checkpoint | None:
    """Every command's first check (§15.5), named for what it checks: without pinned witnesses
    only the site's own signature and its consistency with the checkpoint kept before."""
    what = (
        "the latest witnessed checkpoint"
        if site.witnesses
        else "the site's signature on its latest checkpoint"
    )
    return cast(Checkpoint | None, report.check(what, lambda: site.trusted_checkpoint(report)))


def rule_outcome(verdicts: list[str], min_independent: int) -> tuple[str, str | None]:
    """cairn.rules/0.1: too few → unresolved; any disagreement → contested; else resolved."""
    if len(verdicts) < min_independent:
        return "unresolved", None
    if len(set(verdicts)) == 1:
        return "resolved", verdicts[0]
    return "contested", None


def _load_task(site: Site, reference: str) -> dict[str, Any]:
    path = Path(reference)
    if path.is_file():
        document = json.loads(path.read_text(encoding="utf-8"))
        return document.get("task", document)
    if reference.startswith(("http://", "https://")):
        reference = urllib.parse.urlsplit(reference).path.rstrip("/").rsplit("/", 1)[-1]
    return site.get_json(f"/api/a2a-tasks/{urllib.parse.quote(reference)}")


def _view_checks(report: Report, view: dict[str, Any]) -> None:
    def input_digest() -> None:
        request = {name: view[name] for name in REQUEST_FIELDS}
        if canonical_digest(request) != view["public_input_digest"]:
            raise Failed("the task's request differs from its approved public_input_digest")

    report.check("the task's request matches its public_input_digest", input_digest)
    evaluation = view["evaluation"]
    if evaluation is None:
        return
    items = evaluation["contributions"]
    # A void item counts in no verdict; only a keyper-sealed report can be void (§15.8).
    counted = [item for item in items if "void" not in item]

    def digests() -> None:
        wrong = [
            i["contribution_id"]
            for i in counted
            if canonical_digest(i["report"]) != i["report_digest"]
        ]
        if wrong:
            raise Failed(
                f"the published report differs from the sealed digest for {', '.join(wrong)}"
            )
        plain_void = [i["contribution_id"] for i in items if "void" in i and "sealed" not in i]
        if plain_void:
            raise Failed(f"plain contributions are void: {', '.join(plain_void)}")

    def outcome() -> None:
        verdicts = [item["report"]["verdict"] for item in counted]
        expected = rule_outcome(verdicts, evaluation["min_independent"])
        stated = (evaluation["outcome"], evaluation["verdict"])
        if stated != expected or (view["outcome"], view["verdict"]) != expected:
            raise Failed(f"cairn.rules/0.1 gives {expected}, the task says {stated}")
        counts = Counter(verdicts)
        if evaluation["counts"] != {name: counts.get(name, 0) for name in VERDICTS}:
            raise Failed("the verdict counts do not match the reports")
        if evaluation["min_independent"] != view["min_independent"]:
            raise Failed("the evaluation used another min_independent than the task's")

    void = f", {len(items) - len(counted)} void" if len(counted) < len(items) else ""
    report.check(f"every report matches its digest ({len(counted)} reports{void})", digests)
    report.check("outcome and verdict recomputed by cairn.rules/0.1", outcome)


def command_task(site: Site, reference: str) -> int:
    report = Report()
    view = _load_task(site, reference)
    print(f"task {view['id']} on {site.url}")
    trusted = first_check(report, site)
    _view_checks(report, view)
    if view["evaluation"] is None:
        print("      the task is open: its contributions stay sealed until its deadline")
    if trusted is None:
        return _finish(report)
    rules, applied = LogRules(), list[tuple[int, dict[str, Any]]]()
    chain = chain_read(site, trusted)
    for reading, kept_to, offset in chain:
        served = reading.get_json(f"{reading.log_path}/tasks/{view['id']}")["entries"]
        current = reading is site
        _task_logged_in(report, reading, (kept_to, offset, current), served, rules, applied)
    logged = rules.logged(view["id"], applied)
    if logged is None:
        if not report.waiting.still(task_entry(view)):
            report.fail("the task's entry is not in the log")
    else:
        for problem in evaluation_problems(view, logged, report.waiting):
            report.fail(problem)
        if view["evaluation"] is not None and not report.failures and not report.waiting.until:
            print("ok    the evaluation lists exactly the contributions logged for the task")
        sealed_checks(report, site, view, logged, chain)
    return _finish(report)


def chain_read(site: Site, trusted: Checkpoint) -> list[tuple[Site, int, int]]:
    """The site through each of its logs, oldest first (§16.2), with how much of it holds (an
    earlier log up to the index it lost from) and where it stands in the chain (the entries of
    the logs before it that hold), so the log's rules run across the chain as over one log."""
    readings, offset = [], 0
    for restart in site.restarts:
        old_trusted = site._served_witnessed(restart.previous)
        if old_trusted is not None:
            kept_to = min(restart.lost_from, old_trusted.size)
            readings.append((site.on_log(restart.previous, old_trusted), kept_to, offset))
        offset += restart.lost_from
    return [*readings, (site, trusted.size, offset)]


def chain_place(chain: list[tuple[Site, int, int]], index: int) -> tuple[Site, int]:
    """The log of `chain` holding the entry at `index` of the chain, and its index there."""
    reading, _, offset = next(link for link in reversed(chain) if link[2] <= index)
    return reading, index - offset


def _task_logged_in(
    report: Report,
    site: Site,
    place: tuple[int, int, bool],
    served: list[dict[str, Any]],
    rules: LogRules,
    applied: list[tuple[int, dict[str, Any]]],
) -> None:
    """A task's entries served by one log, each proven in it and run through the rules; `place`
    is how much of the log holds, its offset in the chain, and whether it is the current log."""
    kept_to, offset, current = place
    trusted = site.trusted
    assert trusted is not None
    for item in served:
        entry = item["entry"]
        if item["index"] >= kept_to:
            if current and not report.waiting.still(entry):
                report.fail(f"{describe(entry)} is past the merge delay and not yet witnessed")
            continue
        index = report.check(
            f"{describe(entry)} is in the log", lambda e=entry: site.included(e, trusted)
        )
        if index is not None and index != item["index"]:
            report.fail(f"{describe(entry)} was served at index {item['index']}, proven at {index}")
        applied.append((offset + item["index"], entry))
        for problem in rules.apply(offset + item["index"], entry, _jcs_leaf(entry)):
            report.fail(f"the log's rules: {problem}")
        if entry.get("type") == CONTRIBUTION and site.witnesses:
            report.check(
                f"{describe(entry)} was witnessed within the merge delay",
                lambda i=item["index"], e=entry: site.witnessed_in_time(i, e),
            )


def command_receipt(site: Site, file: str) -> int:
    report = Report()
    receipt = json.loads(Path(file).read_text(encoding="utf-8"))
    claims = {key: value for key, value in receipt.items() if key != "signature"}
    print(f"receipt for contribution {claims.get('contribution_id')} on {site.url}")

    def signature() -> None:
        payload = site.jws_payload(receipt.get("signature", ""))
        if payload != canonical_json(claims):
            raise Failed("the receipt's fields differ from what its signature covers")

    report.check("the receipt is signed by the site key", signature)
    if report.failures:
        return _finish(report)  # nothing else in an unsigned receipt can be trusted
    trusted = first_check(report, site)
    keyper_sealed = claims.get("sealed") == "keypers"
    entry = contribution_entry(
        task_id=claims["task_id"],
        contribution_id=claims["contribution_id"],
        report_digest=claims.get("report_digest", ""),
        salt=claims.get("salt"),
        keyper_commitment=claims["commitment"] if keyper_sealed else None,
        received_at=claims["received_at"],
    )
    if trusted is not None:
        holding = _log_holding(site, entry, trusted)
        if holding is None:
            dropped = _restart_lost(site, entry)
            if dropped is not None:
                return _dropped(report, receipt, dropped)
        holding = holding or site
        assert holding.trusted is not None
        _receipt_in_log(report, holding, receipt, entry, holding.trusted)
    view = site.get_json(f"/api/a2a-tasks/{claims['task_id']}")
    if view["evaluation"] is None:
        print("      the task is not evaluated yet: run this again after its deadline")
        return _finish(report)
    listed = {item["contribution_id"]: item for item in view["evaluation"]["contributions"]}
    item = listed.get(claims["contribution_id"])
    if item is None:
        report.failures += 1
        _evidence(receipt, "OMISSION", "the evaluation leaves this contribution out")
        return _finish(report)
    if keyper_sealed:
        return _sealed_receipt_in_evaluation(report, receipt, item, file)
    changed = [
        name
        for name in ("report_digest", "salt", "received_at")
        if item.get(name) != claims.get(name)
    ]
    if not _listed_altered(report, receipt, changed):
        print("ok    the evaluation counts it with the same report digest, salt and received_at")
    return _finish(report)


def _listed_altered(report: Report, receipt: dict[str, Any], changed: list[str]) -> bool:
    """Whether the evaluation lists the contribution with other `changed` fields than its
    receipt: a failure, with the signed receipt as its evidence."""
    if changed:
        report.failures += 1
        _evidence(
            receipt,
            "ALTERATION",
            f"the evaluation lists this contribution with another {' and '.join(changed)}",
        )
    return bool(changed)


def _sealed_body(item: dict[str, Any]) -> dict[str, Any]:
    body = item.get("sealed")
    return body if isinstance(body, dict) else {}


def _sealed_changed(item: dict[str, Any], claims: dict[str, Any]) -> list[str]:
    """What a keyper-sealed contribution's item shows otherwise than its receipt's claims."""
    changed = [name for name in ("commitment", "received_at") if item.get(name) != claims[name]]
    if _sealed_body(item).get("ciphertext_digest") != claims["ciphertext_digest"]:
        changed.append("ciphertext_digest")
    return changed


def _sealed_receipt_in_evaluation(
    report: Report, receipt: dict[str, Any], item: dict[str, Any], file: str
) -> int:
    """A keyper-sealed contribution's item carries the receipt's commitment, ciphertext and
    received_at; whether a void is right needs the report and salt, which `dispute` takes."""
    if _listed_altered(report, receipt, _sealed_changed(item, receipt)):
        return _finish(report)
    print("ok    the evaluation lists it with the same commitment, ciphertext and received_at")
    void = item.get("void")
    if isinstance(void, dict):
        print(
            f"      it is void as {void.get('code')}: {void.get('message')}; "
            f"`cairn_verify.py dispute {file} <report.json>`, with the report and salt you kept, "
            "says whether that is right"
        )
    return _finish(report)


def _receipt_in_log(
    report: Report,
    site: Site,
    receipt: dict[str, Any],
    entry: dict[str, Any],
    trusted: Checkpoint,
) -> None:
    try:
        index = site.included(entry, trusted)
    except Failed as failure:
        served = site.get_json(f"{site.log_path}/tasks/{entry['task_id']}")["entries"]
        logged = [
            i for i in served if i["entry"].get("contribution_id") == entry["contribution_id"]
        ]
        if logged and logged[0]["entry"] != entry:
            fields = [k for k in entry if logged[0]["entry"].get(k) != entry[k]]
            report.failures += 1
            _evidence(
                receipt,
                "ALTERATION",
                f"the log holds this contribution with another {' and '.join(fields)}",
            )
        elif not report.waiting.still(entry):
            report.failures += 1
            _evidence(receipt, "OMISSION", f"{failure}, past the maximum merge delay")
        return
    print("ok    the contribution is in the log with the receipt's commitment and received_at")
    if site.witnesses:
        try:
            print(
                f"ok    it was witnessed within the merge delay ({site.witnessed_in_time(index, entry)})"
            )
        except Failed as failure:
            report.failures += 1
            _evidence(receipt, "LATE ENTRY", str(failure))


def _log_holding(site: Site, entry: dict[str, Any], trusted: Checkpoint) -> Site | None:
    """The site seen through the log that holds the entry (SPEC §16.2): the current log, where
    an entry logged again after a restart is found too, else an earlier log below the index it
    lost from; None when none does."""
    with contextlib.suppress(Failed):
        site.included(entry, trusted)
        return site
    for restart in reversed(site.restarts):
        old_trusted = site._served_witnessed(restart.previous)
        if old_trusted is None:
            continue
        old = site.on_log(restart.previous, old_trusted)
        with contextlib.suppress(Failed):
            if old.included(entry, old_trusted) < restart.lost_from:
                print(f"      the contribution is in the earlier log {restart.previous.origin}")
                return old
    return None


def _restart_lost(site: Site, entry: dict[str, Any]) -> Restart | None:
    """The restart that lost an entry found in no log: one that says it lost entries, whose
    checkpoint holding them was cosigned after the entry's time (without witnesses, any)."""
    at = entry_time(entry)
    for restart in site.restarts:
        seen = max(restart.checkpoint.cosigned.values(), default=None)
        if restart.lost_to > restart.lost_from and (
            seen is None or at is None or at.timestamp() < seen + 1  # whole seconds
        ):
            return restart
    return None


def _dropped(report: Report, receipt: dict[str, Any], restart: Restart) -> int:
    report.failures += 1
    origin = restart.previous.origin
    print(
        f"FAIL  DROPPED BY THE SITE: the site signed this receipt, then restarted its log, "
        f"recording entries {restart.lost_from} to {restart.lost_to - 1} of {origin} as lost, "
        "and logged this contribution again in none of its logs."
    )
    print("      This receipt is signed by the site key; anyone can check it with cairn_verify.py:")
    print("      " + json.dumps(receipt, separators=(",", ":")))
    print(f"      The checkpoint of {origin} the site signed before it lost them:")
    for line in restart.checkpoint.text.rstrip("\n").split("\n"):
        print(f"      {line}")
    return _finish(report)


def _evidence(receipt: dict[str, Any], kind: str, why: str) -> None:
    print(f"FAIL  PROOF OF {kind}: {why}.")
    print("      This receipt is signed by the site key; anyone can check it with cairn_verify.py:")
    print("      " + json.dumps(receipt, separators=(",", ":")))


def command_log(site: Site, full: bool) -> int:
    report = Report()
    trusted = first_check(report, site)
    if trusted is None:
        return _finish(report)
    print(
        f"      {trusted.size} entries, root {trusted.root.hex()}; kept as the last checkpoint seen"
    )
    if full:
        for reading, _, _ in chain_read(site, trusted):
            checkpoint = reading.trusted
            assert checkpoint is not None

            def recomputed(reading: Site = reading, checkpoint: Checkpoint = checkpoint) -> str:
                tree = CompactRange()
                for _, entry in reading.entries(0, checkpoint.size):
                    tree.append(leaf_hash(entry))
                if tree.root() != checkpoint.root:
                    raise Failed("the entries served do not hash to the checkpoint's root")
                return f"{tree.size} entries"

            of = f" of {checkpoint.origin}" if site.restarts else ""
            report.check(f"the root recomputed from every entry{of}", recomputed)
    return _finish(report)


MONITOR_STATE = 2  # the version of monitor.json this verifier writes; it reads every earlier one


def command_monitor(site: Site) -> int:
    """Reads only what it has not read before, a bundle at a time through the tree and the rules,
    keeping of the entries only what the rules and the evaluations need; its state is saved only
    when everything checks, so a failure is reported again on every run until it is explained.
    Nothing read is trusted before the root: the evaluations are checked after it matches."""
    report = Report()
    trusted = first_check(report, site)
    if trusted is None:
        return _finish(report)
    state_file = site.home / "monitor.json"
    saved = json.loads(state_file.read_text(encoding="utf-8")) if state_file.is_file() else {}
    if saved.get("version", 1) > MONITOR_STATE:
        report.fail(
            f"{state_file} was written by a later verifier (state version {saved['version']}); "
            "run that one, or move the file away to read the log from its start"
        )
        return _finish(report)
    tree = CompactRange.loaded(saved["tree"]) if saved else CompactRange()
    rules = LogRules.loaded(saved.get("rules"), saved.get("version", 1))
    readings = chain_read(site, trusted)
    paths = [reading.log_path for reading, _, _ in readings]
    at = saved.get("log", paths[0])
    del saved
    if at not in paths:
        report.fail(f"the monitor read the log at {at} before; the site's card no longer lists it")
        return _finish(report)
    reading, kept_to, _ = readings[paths.index(at)]
    if reading is not site and tree.size > kept_to:
        # What it read past the index the site lost from may be logged again in the new log:
        # the rules start over from what every log still holds.
        print(f"      the monitor read entries of {at} the site has since lost: it reads again")
        tree, rules, at = CompactRange(), LogRules(), paths[0]
    evaluated: dict[str, None] = {}  # each task once, however many evaluation entries it has
    for reading, kept_to, offset in readings[paths.index(at) :]:
        if reading.log_path != at:
            tree, at = CompactRange(), reading.log_path
        place = (kept_to, offset, reading is site)
        if not _log_monitored(report, reading, place, tree, rules, evaluated):
            return _finish(report)
    for task_id in evaluated:
        _evaluation_monitored(report, site, rules, task_id)
    if not report.failures:
        for task_id in evaluated:
            rules.tasks[task_id].checked()
        _monitor_save(state_file, tree, rules, at)
    return _finish(report)


def _log_monitored(
    report: Report,
    site: Site,
    place: tuple[int, int, bool],
    tree: CompactRange,
    rules: LogRules,
    evaluated: dict[str, None],
) -> bool:
    """The entries of one log of the chain not read before, through the tree and the rules (an
    earlier log's up to the index it lost from); False when the monitor must stop there."""
    kept_to, offset, current = place
    trusted = site.trusted
    assert trusted is not None
    if tree.size > trusted.size:
        report.fail(f"the monitor read {tree.size} entries before; the log now has {trusted.size}")
        return False
    start = tree.size
    try:
        for index, raw in site.entries(start, trusted.size):
            leaf = leaf_hash(raw)
            tree.append(leaf)
            if index >= kept_to:
                continue
            entry = json.loads(raw)
            canonical = canonical_json(entry)
            if canonical != raw:
                report.fail(f"entry {index} is not in its canonical (JCS) form")
                leaf = leaf_hash(canonical)
            for problem in rules.apply(offset + index, entry, leaf):
                report.fail(f"the log's rules: {problem}")
            if entry.get("type") == EVALUATION:
                evaluated[str(entry["task_id"])] = None
    except Failed as failure:
        report.fail(str(failure))
        return False
    if tree.root() != trusted.root:
        report.fail("the entries served do not hash to the witnessed checkpoint's root")
        return False
    read = tree.size - start
    of = f" ({site.log_path})" if site.restarts or not current else ""
    print(
        f"ok    {read} new {'entry' if read == 1 else 'entries'} read, {tree.size} in all, root "
        f"recomputed{of}"
    )
    return True


def _evaluation_monitored(report: Report, site: Site, rules: LogRules, task_id: str) -> None:
    """A task evaluated in the entries just read, its published evaluation against its logged
    entries: those it publishes itself when their hashes are the logged ones, else those the site
    serves for it, held to the logged hashes, which say what differs."""
    task = rules.tasks.get(task_id)
    if task is None or task.leaf is None:
        return  # the rules failed it: no task entry, or a second evaluation entry
    view = site.get_json(f"/api/a2a-tasks/{task_id}")
    logged = rules.logged_as_published(task_id, view)
    assert site.trusted is not None
    chain = chain_read(site, site.trusted)
    if logged is None:
        served = [
            (offset + item["index"], item["entry"])
            for reading, _, offset in chain
            for item in reading.get_json(f"{reading.log_path}/tasks/{task_id}")["entries"]
        ]
        try:
            logged = rules.logged(task_id, served)
        except Failed as failure:
            report.fail(f"task {task_id}: {failure}")
            return
    assert logged is not None
    problems = evaluation_problems(view, logged)
    before = report.failures
    _view_checks(report, view)
    for problem in problems:
        report.fail(f"task {task_id}: {problem}")
    sealed_checks(report, site, view, logged, chain)
    if report.failures == before:
        print(f"ok    task {task_id}: its evaluation matches its logged contributions")


def _monitor_save(state_file: Path, tree: CompactRange, rules: LogRules, log: str) -> None:
    """Written a task at a time to a file beside it, then put in its place: a run stopped while
    saving leaves the state before it."""
    state_file.parent.mkdir(parents=True, exist_ok=True)
    writing = state_file.with_name(state_file.name + ".new")
    with writing.open("w", encoding="utf-8") as out:
        out.write(
            f'{{"version":{MONITOR_STATE},"log":{json.dumps(log)},'
            f'"tree":{json.dumps(tree.saved())},"rules":'
        )
        for part in rules.saved_json():
            out.write(part)
        out.write("}")
    writing.replace(state_file)


def command_seal(
    site: Site, reference: str, report_file: str, keep: str | None, out: TextIO
) -> int:
    """Seal a report for `reference`'s task (§15.8 "Sealing is a client's job"): print the data
    part on `out`; every check goes to stdout, which `main` sends to stderr."""
    report = Report()
    keypers, threshold = site.keypers_to_seal_to()
    document = json.loads(Path(report_file).read_text(encoding="utf-8"))
    if not isinstance(document, dict) or "approval" in document:
        raise Failed(
            f"{report_file} must hold the report without its approval (§4.1): the sealed "
            "payload carries its own"
        )
    view = _load_task(site, reference)
    if view["evaluation"] is not None or instant(view["deadline"]) <= datetime.now(UTC):
        raise Failed(f"task {view['id']} is closed: it takes no more contributions")
    broken, issues = report_rules(document, view["sources"])
    if broken:
        raise Failed(
            f"the site would void this report at the deadline as {broken}: "
            + "; ".join(f"{issue['path'] or 'the report'} {issue['message']}" for issue in issues)
        )
    print("ok    the report meets the rules the site applies when it opens it")
    trusted = first_check(report, site)
    if trusted is None:
        return _finish(report)
    found = report.check(
        "the task's entry and deadline are under it",
        lambda: _task_entry_log(site, trusted, task_entry(view)),
    )
    if found is None:
        return _finish(report)
    origin, index = found
    kept = sealed_kept(
        document,
        cairn_url=site.url,
        site=origin,
        view=view,
        task_entry=index,
        keypers=keypers,
        threshold=threshold,
    )
    payload = kept["sealed"]
    where = (
        Path(keep)
        if keep
        else site.cairn_home / "sealed" / f"{payload['commitment'].split(':')[1]}.json"
    )
    keep_private(where, kept)
    print(
        f"ok    sealed to {len(keypers)} keypers, any {threshold} of which open it after the "
        f"deadline; the report and its salt are kept in {where} (for `dispute`)"
    )
    print(json.dumps(payload), file=out)
    return _finish(report)


def _task_entry_log(site: Site, trusted: Checkpoint, entry: dict[str, Any]) -> tuple[str, int]:
    """The origin of the log holding the task's entry and the entry's index there, proven under
    that log's witnessed checkpoint: a task's entry stays in the log it was written to, so after
    a restart (§16.2) an older task's is in an earlier log, and its shares are bound there."""
    earlier = chain_read(site, trusted)[:-1]
    listings = [
        [
            item
            for item in reading.get_json(f"{reading.log_path}/tasks/{entry['task_id']}")["entries"]
            if item["index"] < kept_to
        ]
        for reading, kept_to, _ in earlier
    ]
    found = entry_log(entry, listings)
    holding = site if found is None else earlier[found[0]][0]
    assert holding.trusted is not None
    return holding.trusted.origin, holding.included(entry, holding.trusted)


def keep_private(path: Path, value: Any) -> None:
    """Write a file only its owner reads (mode 0600), replacing any before it whole."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(json.dumps(value, indent=2) + "\n")
    os.chmod(temporary, 0o600)
    os.replace(temporary, path)


def command_dispute(site: Site, receipt_file: str, report_file: str) -> int:
    """Whether the void of a keyper-sealed contribution is wrongful, from what its contributor
    holds: the signed receipt, and the report and salt its commitment seals."""
    report = Report()
    receipt = json.loads(Path(receipt_file).read_text(encoding="utf-8"))
    kept = json.loads(Path(report_file).read_text(encoding="utf-8"))
    claims = {key: value for key, value in receipt.items() if key != "signature"}
    print(f"dispute for contribution {claims.get('contribution_id')} on {site.url}")

    def signature() -> None:
        if site.jws_payload(receipt.get("signature", "")) != canonical_json(claims):
            raise Failed("the receipt's fields differ from what its signature covers")
        if claims.get("sealed") != "keypers":
            raise Failed("it is the receipt of a plain contribution: `receipt` checks it")

    def sealed_under_it() -> None:
        if not (
            isinstance(kept, dict)
            and isinstance(kept.get("report"), dict)
            and isinstance(kept.get("salt"), str)
        ):
            raise Failed(f"{report_file} holds no report and salt")
        if commitment_of(canonical_digest(kept["report"]), kept["salt"]) != claims["commitment"]:
            raise Failed("this report and salt are not the ones sealed under its commitment")

    report.check(
        "the receipt is signed by the site key, for a keyper-sealed contribution", signature
    )
    if not report.failures:
        report.check("the report and salt are those its commitment seals", sealed_under_it)
    trusted = None
    if not report.failures:
        trusted = first_check(report, site)
    if trusted is None:
        return _finish(report)
    view = site.get_json(f"/api/a2a-tasks/{claims['task_id']}")
    if view["evaluation"] is None:
        report.fail("the task is not evaluated yet: run this again after its deadline")
        return _finish(report)
    listed = {item["contribution_id"]: item for item in view["evaluation"]["contributions"]}
    item = listed.get(claims["contribution_id"])
    evidence = Evidence(report, receipt, kept)
    if item is None:
        return evidence.proof("OMISSION", "the evaluation leaves this contribution out")
    changed = _sealed_changed(item, claims)
    if changed:
        return evidence.proof(
            "ALTERATION",
            f"the evaluation lists this contribution with another {' and '.join(changed)}",
        )
    void = item.get("void")
    if not isinstance(void, dict):
        if (item.get("report"), item.get("salt")) != (kept["report"], kept["salt"]):
            return evidence.proof(
                "ALTERATION", "the evaluation counts this contribution with another report or salt"
            )
        print("ok    the evaluation counts it with this report: there is nothing to dispute")
        return _finish(report)
    print(f"      the evaluation voids it as {void.get('code')}: {void.get('message')}")
    logged, chain = _logged_task(report, site, view["id"], trusted)
    if logged is None:
        return _finish(report)
    try:
        wrongful, why = _void_disputed(
            site, report, sealed_of(site, view, logged, item, chain), item, kept
        )
    except Failed as failure:
        report.fail(str(failure))
        return _finish(report)
    if wrongful:
        return evidence.proof("A WRONGFUL VOID", why)
    print(f"ok    the void is right: {why}")
    return _finish(report)


def _logged_task(
    report: Report, site: Site, task_id: str, trusted: Checkpoint
) -> tuple[dict[str, Any] | None, list[tuple[Site, int, int]]]:
    """The task's entries as the log's rules read them across the site's chain of logs, each
    proven under its log's checkpoint; and the chain they are indexed across."""
    rules, applied = LogRules(), []
    chain = chain_read(site, trusted)
    for reading, kept_to, offset in chain:
        checkpoint = reading.trusted
        assert checkpoint is not None
        for item in reading.get_json(f"{reading.log_path}/tasks/{task_id}")["entries"]:
            if item["index"] >= kept_to:
                continue
            index = report.check(
                f"{describe(item['entry'])} is in the log",
                lambda e=item["entry"], r=reading, c=checkpoint: r.included(e, c),
            )
            if index is not None and index == item["index"]:
                applied.append((offset + index, item["entry"]))
                rules.apply(offset + index, item["entry"], _jcs_leaf(item["entry"]))
    logged = rules.logged(task_id, applied)
    if logged is None:
        report.fail("the task's entry is not in the log")
    return logged, chain


def _void_disputed(
    site: Site, report: Report, sealed: Sealed, item: dict[str, Any], kept: dict[str, Any]
) -> tuple[bool, str]:
    """(whether the void is wrongful, why), given the report and salt the receipt seals."""
    code = item["void"].get("code")
    body = item["sealed"]
    releases = Releases(site, sealed).add(body.get("releases", []))
    if code in ("private_content", *RULE_VOIDS):
        broken, issues = report_rules(kept["report"], sealed.sources)
        if broken:
            said = "; ".join(f"{i['path'] or 'the report'} {i['message']}" for i in issues)
            return False, f"the report breaks {broken} ({said})"
        if code == "invalid_payload":
            try:
                key = _key(sealed, releases.by())
                ciphertext = b64u_decode(body["ciphertext"])
            except (SealError, KeyError, ValueError):
                key = None  # the site could not have opened it
            if key is not None:
                try:
                    _opened(sealed, ciphertext, key)
                except SealError as error:
                    return (
                        False,
                        f"the ciphertext sent does not open with the keypers' key: {error}",
                    )
        return True, f"void as {code}, yet the report sealed under this receipt breaks no rule"
    if code == KEYS_UNAVAILABLE:
        releases.add(kept.get("releases", []) if isinstance(kept.get("releases"), list) else [])
        shares = (kept.get("sealed") or {}).get("shares") or body.get("shares") or []
        fault, found, in_time = keys_in_time(site, report, sealed, releases, shares)
        if fault == INCONSISTENT_SHARES:
            return False, f"the keypers' releases disagree ({fault})"
        if fault:
            return True, (
                f"void as keys_unavailable, yet {found}; their signed releases are "
                + json.dumps(in_time, separators=(",", ":"))
            )
        return False, found
    if code == INCONSISTENT_SHARES:
        if len(releases.valid) <= sealed.threshold:
            return True, (
                f"void as inconsistent_shares, yet it publishes {len(releases.valid)} signed "
                f"releases (threshold {sealed.threshold}): no disagreement can show"
            )
        try:
            _key(sealed, releases.by())
        except SealError:
            return False, "its signed releases disagree"
        return True, "void as inconsistent_shares, yet its signed releases agree on one key"
    raise Failed(f"the void has an unknown code {code!r}")


class Evidence:
    """What `dispute` prints as proof: the signed receipt, and the report and salt its
    commitment seals, which anyone can check with this verifier."""

    def __init__(self, report: Report, receipt: dict[str, Any], kept: dict[str, Any]) -> None:
        self.report, self.receipt, self.kept = report, receipt, kept

    def proof(self, kind: str, why: str) -> int:
        self.report.failures += 1
        print(f"FAIL  PROOF OF {kind}: {why}.")
        print(
            "      The receipt is signed by the site key and its commitment seals this report and "
            "salt; anyone can check both with cairn_verify.py:"
        )
        print("      " + json.dumps(self.receipt, separators=(",", ":")))
        sealed = {"report": self.kept["report"], "salt": self.kept["salt"]}
        print("      " + json.dumps(sealed, separators=(",", ":")))
        _finish(self.report)
        return PROOF


def _finish(report: Report) -> int:
    if report.failures:
        print(f"NOT VERIFIED: {report.failures} check(s) failed")
        return 1
    if report.waiting.until is not None:
        print(
            "NOT YET VERIFIED: nothing failed, but entries are still within their merge delay; "
            f"run again after {format_time(report.waiting.until)}"
        )
        return NOT_YET
    print("verified")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cairn_verify.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("CAIRN_URL", DEFAULT_CAIRN_URL))
    parser.add_argument(
        "--witnesses",
        metavar="FILE",
        help="pin these witnesses, keypers and thresholds instead of the card's (lines: a witness "
        "verifier key and its URL, `quorum <k>`, `keyper <name> <hpke_key> <URL>`, "
        "`keyper_threshold <k>`)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("task").add_argument("task", help="a task id, its URL or its saved JSON")
    commands.add_parser("receipt").add_argument("file", help="a receipt saved as JSON")
    commands.add_parser("log").add_argument(
        "--full", action="store_true", help="fetch every entry and recompute the root"
    )
    commands.add_parser("monitor")
    sealing = commands.add_parser("seal")
    sealing.add_argument("task", help="the task's id or URL")
    sealing.add_argument("report", help="the report (§4.1, without its approval) as JSON")
    sealing.add_argument(
        "--keep", metavar="FILE", help="where to keep the report and its salt (mode 0600)"
    )
    disputing = commands.add_parser("dispute")
    disputing.add_argument("receipt", help="the receipt of a keyper-sealed contribution")
    disputing.add_argument("report", help='the report and salt kept: {"report": ..., "salt": ...}')
    args = parser.parse_args(argv)
    home = Path(os.environ.get("CAIRN_HOME", "~/.cairn")).expanduser()
    if args.command == "seal":
        out = sys.stdout
        with contextlib.redirect_stdout(sys.stderr):  # stdout is the sealed payload alone
            return _run(
                lambda: command_seal(_site(args, home), args.task, args.report, args.keep, out)
            )
    commands_run: dict[str, Callable[[Site], int]] = {
        "task": lambda site: command_task(site, args.task),
        "receipt": lambda site: command_receipt(site, args.file),
        "monitor": command_monitor,
        "log": lambda site: command_log(site, args.full),
        "dispute": lambda site: command_dispute(site, args.receipt, args.report),
    }
    return _run(lambda: commands_run[args.command](_site(args, home)))


def _site(args: argparse.Namespace, home: Path) -> Site:
    return Site(args.url, home, args.witnesses)


def _run(command: Callable[[], int]) -> int:
    try:
        return command()
    except Failed as failure:
        print(f"FAIL  {failure}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
