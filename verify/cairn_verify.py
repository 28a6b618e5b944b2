# /// script
# requires-python = ">=3.11"
# dependencies = ["cryptography>=42", "joserfc>=1.0", "rfc8785>=0.1.4"]
# ///
"""Check a Cairn site offline, trusting only the site key and witnesses pinned on first use (SPEC §15.5).

    cairn_verify.py task <id | URL | saved JSON>   the task, its reports, its evaluation, its entries
                                                   in the log and the log's rules over them
    cairn_verify.py receipt <file>                 a receipt: its signature, its contribution in the
                                                   log and in the evaluation (or proof of omission)
    cairn_verify.py log [--full]                   the latest witnessed checkpoint, consistent with the
                                                   last one kept; --full recomputes its root
    cairn_verify.py monitor                        every entry not read before: the tree, the log's
                                                   rules, and each evaluation against its log

The first run pins the site's JWKS and the witnesses its card names (or, with --witnesses FILE,
those of the file: verifier keys one a line and `quorum <k>`) under CAIRN_HOME/verify/ (CAIRN_HOME
defaults to ~/.cairn), and every run keeps the latest checkpoint it accepted there. Exit status 0
only when everything checks; each failure says what does not match.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
import warnings
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from joserfc import jws
from joserfc.errors import JoseError, SecurityWarning
from joserfc.jwk import KeySet, KeySetSerialization

DEFAULT_CAIRN_URL = "http://127.0.0.1:8000"
MAX_MERGE_DELAY = timedelta(seconds=60)
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
TASK, CONTRIBUTION, EVALUATION = "cairn.log/task", "cairn.log/contribution", "cairn.log/evaluation"
NO_WITNESSES = (
    "no witnesses are pinned for this site: a split view (another history shown to others) or a "
    "late entry cannot be ruled out"
)


class Failed(Exception):
    """A check that does not hold; its message says what does not match."""


# --- RFC 9162 §2.1 -----------------------------------------------------------------------------


def leaf_hash(entry: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def root_from_inclusion(index: int, size: int, leaf: bytes, path: list[bytes]) -> bytes:
    """RFC 9162 §2.1.3.2: the root the audit path leads to, or Failed when it is malformed."""
    if index >= size:
        raise Failed(f"leaf index {index} is outside a tree of size {size}")
    fn, sn, result = index, size - 1, leaf
    for sibling in path:
        if sn == 0:
            raise Failed("the inclusion proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            result = node_hash(sibling, result)
            while not (fn & 1 or fn == 0):
                fn, sn = fn >> 1, sn >> 1
        else:
            result = node_hash(result, sibling)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise Failed("the inclusion proof is shorter than the tree is deep")
    return result


def check_consistency(
    first: int, second: int, first_root: bytes, second_root: bytes, path: list[bytes]
) -> None:
    """RFC 9162 §2.1.4.2: the tree of `second` leaves extends the tree of `first` unchanged."""
    if first == second:
        if path or first_root != second_root:
            raise Failed(f"two different roots for the same tree size {first}")
        return
    if first > second:
        raise Failed(f"the log shrank from {first} to {second} entries")
    if first == 0:
        if first_root != hashlib.sha256(b"").digest():
            raise Failed("the empty tree seen before had a root other than the empty hash")
        return
    if not path:
        raise Failed("the consistency proof is empty")
    if first & (first - 1) == 0:
        path = [first_root, *path]
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise Failed("the consistency proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not (fn & 1 or fn == 0):
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0 or fr != first_root or sr != second_root:
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


def digest(value: Any) -> str:
    return "sha256:" + hashlib.sha256(rfc8785.dumps(value)).hexdigest()


def b64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:
        raise Failed(f"{text[:20]!r}... is not base64") from None


@dataclass(frozen=True)
class WitnessKey:
    """A C2SP `tlog-cosignature` verifier key: `<name>+<key ID hex>+<base64(0x04 ‖ key)>`."""

    text: str
    name: str
    key_id: bytes
    public: bytes

    @classmethod
    def parsed(cls, text: str) -> WitnessKey:
        parts = text.strip().split("+", 2)
        if len(parts) != 3:
            raise Failed(f"{text!r} is not a witness verifier key")
        raw = b64(parts[2])
        if len(raw) != 33 or raw[0] != 0x04:
            raise Failed(f"the key of witness {parts[0]} is not a cosignature/v1 Ed25519 key")
        key_id = hashlib.sha256(parts[0].encode() + b"\n" + raw[:1] + raw[1:]).digest()[:4]
        if key_id.hex() != parts[1].lower():
            raise Failed(f"the key of witness {parts[0]} names the wrong key ID")
        return cls(text.strip(), parts[0], key_id, raw[1:])


@dataclass(frozen=True)
class Checkpoint:
    text: str
    size: int
    root: bytes
    cosigned: dict[str, int]  # pinned witness key → the POSIX time it cosigned this checkpoint

    def witnessed_at(self, quorum: int) -> int | None:
        """The quorum-th earliest cosignature time: when a quorum had seen this tree (§15.4)."""
        times = sorted(self.cosigned.values())
        return times[quorum - 1] if 0 < quorum <= len(times) else None


def _signature_lines(text: str) -> tuple[str, list[tuple[str, bytes]]]:
    body, separator, rest = text.partition("\n\n")
    if not separator or len(body.split("\n")) < 3:
        raise Failed("the checkpoint is not a signed note")
    lines = []
    for line in rest.splitlines():
        dash, _, named = line.partition(" ")
        name, _, stamp = named.partition(" ")
        if dash == "\u2014" and name and stamp:
            lines.append((name, b64(stamp)))
    return body + "\n", lines


# --- The site, and what this verifier pinned of it ---------------------------------------------


class Site:
    def __init__(self, url: str, home: Path, witnesses_file: str | None = None) -> None:
        self.url = url.rstrip("/")
        host = urllib.parse.urlsplit(self.url).netloc.replace(":", "_")
        self.home = home / "verify" / host
        self.jwks = self._pinned_jwks()
        self.witnesses, self.quorum = self._pinned_witnesses(witnesses_file)
        self.trusted: Checkpoint | None = None

    def get(self, path: str, query: dict[str, Any] | None = None) -> tuple[int, bytes]:
        url = self.url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        try:
            with urllib.request.urlopen(url, timeout=20) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()
        except OSError as error:
            raise Failed(f"cannot reach {url}: {error}") from None

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

    def _card_witnesses(self) -> tuple[list[str], int]:
        card = self.get_json("/.well-known/agent-card.json")
        for extension in card.get("capabilities", {}).get("extensions", []):
            if extension.get("uri") == VERIFIABLE_EXTENSION:
                params = extension.get("params", {})
                keys = [w["key"] for w in params.get("witnesses", [])]
                return keys, int(params.get("witness_quorum", len(keys)))
        return [], 0

    def _pinned_witnesses(self, witnesses_file: str | None) -> tuple[list[WitnessKey], int]:
        pinned = self.home / "witnesses.json"
        if witnesses_file is not None:
            keys, quorum = _witnesses_file(Path(witnesses_file))
            self._pin("witnesses.json", {"keys": keys, "quorum": quorum})
            self._card_names_them(keys, quorum)
        elif pinned.is_file():
            saved = json.loads(pinned.read_text(encoding="utf-8"))
            keys, quorum = saved["keys"], saved["quorum"]
        else:
            keys, quorum = self._card_witnesses()
            self._pin("witnesses.json", {"keys": keys, "quorum": quorum})
            print(f"pinned {len(keys)} witness(es), quorum {quorum}, from the site's card")
        witnesses = [WitnessKey.parsed(key) for key in keys]
        if not 0 <= quorum <= len(witnesses) or (witnesses and quorum == 0):
            raise Failed(f"a quorum of {quorum} among {len(witnesses)} witnesses makes no sense")
        return witnesses, quorum

    def _card_names_them(self, keys: list[str], quorum: int) -> None:
        named, card_quorum = self._card_witnesses()
        missing = [key.split("+", 1)[0] for key in keys if key not in named]
        if missing or card_quorum < quorum:
            raise Failed(
                f"the site's card names fewer witnesses than pinned (missing: "
                f"{', '.join(missing) or 'none'}; its quorum {card_quorum}, pinned {quorum})"
            )

    def ed25519_keys(self) -> list[bytes]:
        return [
            base64.urlsafe_b64decode(key["x"] + "=" * (-len(key["x"]) % 4))
            for key in self.jwks.get("keys", [])
            if key.get("kty") == "OKP" and key.get("crv") == "Ed25519"
        ]

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
        body, signatures = _signature_lines(text)
        origin, size_line, root_line = body.split("\n")[:3]
        if not size_line.isdigit():
            raise Failed("the checkpoint's tree size is not a number")
        size, root = int(size_line), b64(root_line)
        signed = False
        for name, raw in signatures:
            for public in self.ed25519_keys():
                if name != origin or raw[:4] != _key_id(name, 0x01, public):
                    continue
                try:
                    Ed25519PublicKey.from_public_bytes(public).verify(raw[4:], body.encode())
                except InvalidSignature:
                    raise Failed(f"the checkpoint's signature by {name} does not verify") from None
                signed = True
        if not signed:
            raise Failed(f"the checkpoint carries no signature by a pinned key for {origin}")
        cosigned = {}
        for witness in self.witnesses:
            for name, raw in signatures:
                if name == witness.name and raw[:4] == witness.key_id:
                    cosigned[witness.text] = _cosignature_time(witness, body, raw[4:])
        return Checkpoint(text, size, root, cosigned)

    def quorate(self, checkpoint: Checkpoint) -> bool:
        return len(checkpoint.cosigned) >= self.quorum

    def consistent(self, old: Checkpoint, new: Checkpoint) -> None:
        """`new` extends `old` (or is the same tree); Failed otherwise."""
        path: list[bytes] = []
        if 0 < old.size < new.size:
            proof = self.get_json(
                "/api/log/proof/consistency", {"first": old.size, "second": new.size}
            )
            path = [bytes.fromhex(h) for h in proof["hashes"]]
        check_consistency(old.size, new.size, old.root, new.root, path)

    def trusted_checkpoint(self, report: Report) -> Checkpoint:
        """The latest checkpoint carrying the pinned quorum, checked against the one kept from
        the last run, and kept in its place. Every command starts here."""
        status, body = self.get("/api/log/checkpoint")
        if status != 200:
            raise Failed(f"the log has no checkpoint to check ({status})")
        latest = self.checkpoint(body.decode())
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
        kept_file = self.home / "checkpoint"
        if kept_file.is_file():
            kept = self.checkpoint(kept_file.read_text(encoding="utf-8"))
            if kept.size > trusted.size:  # what was kept carried the quorum too
                raise Failed(
                    f"the log shrank from {kept.size} to {trusted.size} entries since the "
                    "checkpoint kept before: it rewrote its history"
                )
            self.consistent(kept, trusted)
            print(f"ok    the log of {trusted.size} entries extends the {kept.size} kept before")
        if not kept_file.is_file() or kept.size < trusted.size:
            self.home.mkdir(parents=True, exist_ok=True)
            kept_file.write_text(trusted.text, encoding="utf-8")
        self.trusted = trusted
        return trusted

    def _latest_quorate(self, latest: Checkpoint) -> Checkpoint | None:
        if latest.size == 0:
            return None
        status, body = self.get("/api/log/checkpoints", {"covering": 0})
        if status == 404:
            return None
        if status != 200:
            raise Failed(f"/api/log/checkpoints answered {status}")
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
        for item in self.get_json("/api/log/entries", {"start": start, "end": end})["entries"]:
            at = entry_time(item["entry"])
            if at is not None and at + MAX_MERGE_DELAY < now:
                raise Failed(
                    f"{describe(item['entry'])} (entry {item['index']}, of {at:%Y-%m-%dT%H:%M:%S}Z) "
                    "should be under a witnessed checkpoint by now and is not"
                )

    def included(self, entry: dict[str, Any], checkpoint: Checkpoint) -> int:
        """The entry's index once its inclusion under the checkpoint is proven; Failed otherwise."""
        leaf = leaf_hash(rfc8785.dumps(entry))
        status, body = self.get(
            "/api/log/proof/inclusion", {"leaf_hash": leaf.hex(), "tree_size": checkpoint.size}
        )
        if status == 404:
            raise Failed(
                f"{describe(entry)} is not in the log under the checkpoint of size {checkpoint.size}"
            )
        if status != 200:
            raise Failed(f"the inclusion proof for {describe(entry)} answered {status}")
        proof = json.loads(body)
        path = [bytes.fromhex(h) for h in proof["hashes"]]
        if root_from_inclusion(proof["index"], checkpoint.size, leaf, path) != checkpoint.root:
            raise Failed(
                f"the inclusion proof of {describe(entry)} does not lead to the signed root"
            )
        return int(proof["index"])

    def witnessed_in_time(self, index: int, entry: dict[str, Any]) -> str:
        """The entry was under a witnessed checkpoint within the merge delay of its own time
        (§15.2): the earliest quorate checkpoint holding it says when a quorum saw it."""
        at = entry_time(entry)
        assert at is not None and self.trusted is not None
        status, body = self.get("/api/log/checkpoints", {"covering": index})
        if status == 404:
            raise Failed(f"{describe(entry)} is under no witnessed checkpoint")
        if status != 200:
            raise Failed(f"/api/log/checkpoints answered {status}")
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

    def entries(self, start: int, end: int) -> list[tuple[int, bytes]]:
        """Entries [start, end) as their exact bytes: from the tiles' entry bundles, or from
        /api/log/entries where a site serves no tiles."""
        found: list[tuple[int, bytes]] = []
        tile = start // 256
        while tile * 256 < end:
            width = min(256, end - tile * 256)
            path = f"/api/log/tile/entries/{tile_path(tile)}" + (
                f".p/{width}" if width < 256 else ""
            )
            status, body = self.get(path)
            if status == 404 and not found and tile == start // 256:
                return self._entries_by_page(start, end)
            if status != 200:
                raise Failed(f"{path} answered {status}")
            for offset, entry in enumerate(bundle_entries(body)):
                index = tile * 256 + offset
                if start <= index < end:
                    found.append((index, entry))
            tile += 1
        if [index for index, _ in found] != list(range(start, end)):
            raise Failed(f"the entry bundles do not hold exactly entries {start} to {end - 1}")
        return found

    def _entries_by_page(self, start: int, end: int) -> list[tuple[int, bytes]]:
        found = []
        while start < end:
            page = self.get_json("/api/log/entries", {"start": start, "end": end})["entries"]
            if not page:
                raise Failed(f"/api/log/entries served nothing from entry {start}")
            for item in page:
                found.append((item["index"], rfc8785.dumps(item["entry"])))
            start = found[-1][0] + 1
        return found


def _key_id(name: str, kind: int, public: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + bytes([kind]) + public).digest()[:4]


def _cosignature_time(witness: WitnessKey, body: str, signature: bytes) -> int:
    if len(signature) != 72:
        raise Failed(f"the cosignature by {witness.name} is not a timestamped Ed25519 signature")
    timestamp = int.from_bytes(signature[:8], "big")
    message = f"cosignature/v1\ntime {timestamp}\n{body}".encode()
    try:
        Ed25519PublicKey.from_public_bytes(witness.public).verify(signature[8:], message)
    except InvalidSignature:
        raise Failed(f"the cosignature by witness {witness.name} does not verify") from None
    return timestamp


def _witnesses_file(path: Path) -> tuple[list[str], int]:
    keys, quorum = [], None
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line.startswith("quorum "):
            quorum = int(line.split()[1])
        elif line and not line.startswith("#"):
            keys.append(line)
    return keys, len(keys) if quorum is None else quorum


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


def sealed_as(report_digest: str, salt: str | None) -> dict[str, str]:
    """What a contribution entry holds of its report: the salted commitment (§15.2), or the bare
    digest of a contribution made before salts."""
    if salt is None:
        return {"report_digest": report_digest}
    return {"commitment": digest({"report_digest": report_digest, "salt": salt})}


# --- The log's rules (§15.3) -------------------------------------------------------------------


class LogRules:
    """The log's rules, applied entry by entry in log order. Its state is what the monitor keeps
    between runs: for each task, its deadline, its logged contributions and its evaluation."""

    def __init__(self, saved: dict[str, Any] | None = None) -> None:
        saved = saved or {}
        self.tasks: dict[str, dict[str, Any]] = saved.get("tasks", {})
        self.contributions: dict[str, str] = saved.get("contributions", {})

    def saved(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "contributions": self.contributions}

    def apply(self, index: int, entry: dict[str, Any]) -> list[str]:
        kind, task_id = entry.get("type"), str(entry.get("task_id"))
        task = self.tasks.get(task_id)
        where = f"entry {index} ({describe(entry)})"
        if kind == TASK:
            if task is not None:
                return [f"{where}: a second task entry for task {task_id}"]
            self.tasks[task_id] = {
                "index": index,
                "entry": entry,
                "contributions": [],
                "evaluation": None,
            }
            return []
        if kind not in (CONTRIBUTION, EVALUATION):
            return []
        if task is None:
            return [f"{where} comes before any task entry of task {task_id}"]
        deadline = instant(task["entry"]["deadline"])
        if kind == CONTRIBUTION:
            problems = []
            contribution_id = str(entry.get("contribution_id"))
            if contribution_id in self.contributions:
                problems.append(f"{where}: contribution {contribution_id} is logged twice")
            if task["evaluation"] is not None:
                problems.append(f"{where} comes after the task's evaluation entry")
            if instant(entry["received_at"]) > deadline:
                problems.append(f"{where} was received after the task's deadline")
            self.contributions[contribution_id] = task_id
            task["contributions"].append({"index": index, "entry": entry})
            return problems
        if task["evaluation"] is not None:
            return [
                f"{where}: a second evaluation entry for task {task_id} (the first is entry "
                f"{task['evaluation']['index']})"
            ]
        task["evaluation"] = {"index": index, "entry": entry}
        if instant(entry["evaluated_at"]) < deadline:
            return [f"{where}: the task was evaluated before its deadline"]
        return []


def evaluation_problems(view: dict[str, Any], logged: dict[str, Any]) -> list[str]:
    """The task's public evaluation against its logged entries: the task entry, exactly the
    logged contributions (ids, commitments, received_at, in log order), the evaluation entry."""
    problems = []
    task_entry = {
        "type": TASK,
        "task_id": view["id"],
        "public_input_digest": view["public_input_digest"],
        "deadline": view["deadline"],
        "created_at": view["created_at"],
    }
    if logged["entry"] != task_entry:
        problems.append("the task's entry in the log differs from the task as published")
    evaluation = view.get("evaluation")
    if evaluation is None:
        if logged["evaluation"] is not None:
            problems.append("the log holds an evaluation entry for a task published as open")
        return problems
    published = [
        {
            "type": CONTRIBUTION,
            "task_id": view["id"],
            "contribution_id": item["contribution_id"],
            **sealed_as(item["report_digest"], item.get("salt")),
            "received_at": item["received_at"],
        }
        for item in evaluation["contributions"]
    ]
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
    for contribution_id in published_ids.keys() - logged_ids.keys():
        problems.append(
            f"the evaluation counts contribution {contribution_id}, which is not logged"
        )
    if not problems and published != in_log:
        problems.append("the evaluation lists its contributions in another order than received")
    expected = {
        "type": EVALUATION,
        "task_id": view["id"],
        "outcome": view["outcome"],
        "evaluated_at": view["evaluated_at"],
        "evaluation_digest": digest(evaluation),
    }
    if logged["evaluation"] is None:
        problems.append("the task's evaluation entry is not in the log")
    elif logged["evaluation"]["entry"] != expected:
        problems.append("the published evaluation differs from the one its log entry commits to")
    return problems


# --- The four commands -------------------------------------------------------------------------


class Report:
    def __init__(self) -> None:
        self.failures = 0
        self.notes: set[str] = set()

    def check(self, what: str, run: Any) -> Any:
        try:
            result = run()
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
        if digest(request) != view["public_input_digest"]:
            raise Failed("the task's request differs from its approved public_input_digest")

    report.check("the task's request matches its public_input_digest", input_digest)
    evaluation = view["evaluation"]
    if evaluation is None:
        return
    items = evaluation["contributions"]

    def digests() -> None:
        wrong = [i["contribution_id"] for i in items if digest(i["report"]) != i["report_digest"]]
        if wrong:
            raise Failed(
                f"the published report differs from the sealed digest for {', '.join(wrong)}"
            )

    def outcome() -> None:
        verdicts = [item["report"]["verdict"] for item in items]
        expected = rule_outcome(verdicts, evaluation["min_independent"])
        stated = (evaluation["outcome"], evaluation["verdict"])
        if stated != expected or (view["outcome"], view["verdict"]) != expected:
            raise Failed(f"cairn.rules/0.1 gives {expected}, the task says {stated}")
        counts = Counter(verdicts)
        if evaluation["counts"] != {name: counts.get(name, 0) for name in VERDICTS}:
            raise Failed("the verdict counts do not match the reports")
        if evaluation["min_independent"] != view["min_independent"]:
            raise Failed("the evaluation used another min_independent than the task's")

    report.check(f"every report matches its digest ({len(items)} reports)", digests)
    report.check("outcome and verdict recomputed by cairn.rules/0.1", outcome)


def command_task(site: Site, reference: str) -> int:
    report = Report()
    view = _load_task(site, reference)
    print(f"task {view['id']} on {site.url}")
    _view_checks(report, view)
    if view["evaluation"] is None:
        print("      the task is open: its contributions stay sealed until its deadline")
    trusted = report.check(
        "the latest witnessed checkpoint", lambda: site.trusted_checkpoint(report)
    )
    if trusted is None:
        return _finish(report)
    served = site.get_json(f"/api/log/tasks/{view['id']}")["entries"]
    rules = LogRules()
    for item in served:
        entry = item["entry"]
        if item["index"] >= trusted.size:
            at = entry_time(entry)
            if at is not None and at + MAX_MERGE_DELAY < datetime.now(UTC):
                report.fail(f"{describe(entry)} is past the merge delay and not yet witnessed")
            else:
                report.note(f"{describe(entry)} is not yet under a witnessed checkpoint")
            continue
        index = report.check(
            f"{describe(entry)} is in the log", lambda e=entry: site.included(e, trusted)
        )
        if index is not None and index != item["index"]:
            report.fail(f"{describe(entry)} was served at index {item['index']}, proven at {index}")
        for problem in rules.apply(item["index"], entry):
            report.fail(f"the log's rules: {problem}")
        if entry.get("type") == CONTRIBUTION and site.witnesses:
            report.check(
                f"{describe(entry)} was witnessed within the merge delay",
                lambda i=item["index"], e=entry: site.witnessed_in_time(i, e),
            )
    logged = rules.tasks.get(view["id"])
    if logged is None:
        report.fail("the task's entry is not in the log")
    else:
        for problem in evaluation_problems(view, logged):
            report.fail(problem)
        if view["evaluation"] is not None and not report.failures:
            print("ok    the evaluation lists exactly the contributions logged for the task")
    return _finish(report)


def command_receipt(site: Site, file: str) -> int:
    report = Report()
    receipt = json.loads(Path(file).read_text(encoding="utf-8"))
    claims = {key: value for key, value in receipt.items() if key != "signature"}
    print(f"receipt for contribution {claims.get('contribution_id')} on {site.url}")

    def signature() -> None:
        payload = site.jws_payload(receipt.get("signature", ""))
        if payload != rfc8785.dumps(claims):
            raise Failed("the receipt's fields differ from what its signature covers")

    report.check("the receipt is signed by the site key", signature)
    if report.failures:
        return _finish(report)  # nothing else in an unsigned receipt can be trusted
    trusted = report.check(
        "the latest witnessed checkpoint", lambda: site.trusted_checkpoint(report)
    )
    entry = {
        "type": CONTRIBUTION,
        "task_id": claims["task_id"],
        "contribution_id": claims["contribution_id"],
        **sealed_as(claims["report_digest"], claims.get("salt")),
        "received_at": claims["received_at"],
    }
    due = instant(claims["received_at"]) + MAX_MERGE_DELAY
    if trusted is not None:
        _receipt_in_log(report, site, receipt, entry, trusted, due)
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
    changed = [
        name
        for name in ("report_digest", "salt", "received_at")
        if item.get(name) != claims.get(name)
    ]
    if changed:
        report.failures += 1
        _evidence(
            receipt,
            "ALTERATION",
            f"the evaluation lists this contribution with another {' and '.join(changed)}",
        )
    else:
        print("ok    the evaluation counts it with the same report digest, salt and received_at")
    return _finish(report)


def _receipt_in_log(
    report: Report,
    site: Site,
    receipt: dict[str, Any],
    entry: dict[str, Any],
    trusted: Checkpoint,
    due: datetime,
) -> None:
    try:
        index = site.included(entry, trusted)
    except Failed as failure:
        served = site.get_json(f"/api/log/tasks/{entry['task_id']}")["entries"]
        logged = [
            i for i in served if i["entry"].get("contribution_id") == entry["contribution_id"]
        ]
        report.failures += 1
        if logged and logged[0]["entry"] != entry:
            fields = [k for k in entry if logged[0]["entry"].get(k) != entry[k]]
            _evidence(
                receipt,
                "ALTERATION",
                f"the log holds this contribution with another {' and '.join(fields)}",
            )
        elif datetime.now(UTC) < due:
            print(
                f"FAIL  not witnessed yet: {failure} (the merge delay runs until {due:%H:%M:%S}Z)"
            )
        else:
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


def _evidence(receipt: dict[str, Any], kind: str, why: str) -> None:
    print(f"FAIL  PROOF OF {kind}: {why}.")
    print("      This receipt is signed by the site key; anyone can check it with cairn_verify.py:")
    print("      " + json.dumps(receipt, separators=(",", ":")))


def command_log(site: Site, full: bool) -> int:
    report = Report()
    trusted = report.check(
        "the latest witnessed checkpoint", lambda: site.trusted_checkpoint(report)
    )
    if trusted is None:
        return _finish(report)
    print(
        f"      {trusted.size} entries, root {trusted.root.hex()}; kept as the last checkpoint seen"
    )
    if full:

        def recomputed() -> str:
            tree = CompactRange()
            for _, entry in site.entries(0, trusted.size):
                tree.append(leaf_hash(entry))
            if tree.root() != trusted.root:
                raise Failed("the entries served do not hash to the checkpoint's root")
            return f"{tree.size} entries"

        report.check("the root recomputed from every entry", recomputed)
    return _finish(report)


def command_monitor(site: Site) -> int:
    """Reads only what it has not read before; its state is saved only when everything checks,
    so a failure is reported again on every run until it is explained."""
    report = Report()
    trusted = report.check(
        "the latest witnessed checkpoint", lambda: site.trusted_checkpoint(report)
    )
    if trusted is None:
        return _finish(report)
    state_file = site.home / "monitor.json"
    saved = json.loads(state_file.read_text(encoding="utf-8")) if state_file.is_file() else {}
    tree = CompactRange.loaded(saved["tree"]) if saved else CompactRange()
    rules = LogRules(saved.get("rules"))
    if tree.size > trusted.size:
        report.fail(f"the monitor read {tree.size} entries before; the log now has {trusted.size}")
        return _finish(report)
    evaluated: dict[str, None] = {}  # each task once, however many evaluation entries it has
    try:
        entries = site.entries(tree.size, trusted.size)
    except Failed as failure:
        report.fail(str(failure))
        return _finish(report)
    for index, raw in entries:
        tree.append(leaf_hash(raw))
        entry = json.loads(raw)
        if rfc8785.dumps(entry) != raw:
            report.fail(f"entry {index} is not in its canonical (JCS) form")
        for problem in rules.apply(index, entry):
            report.fail(f"the log's rules: {problem}")
        if entry.get("type") == EVALUATION:
            evaluated[str(entry["task_id"])] = None
    if tree.root() != trusted.root:
        report.fail("the entries served do not hash to the witnessed checkpoint's root")
        return _finish(report)
    print(f"ok    {len(entries)} new entries read, {tree.size} in all, root recomputed")
    for task_id in evaluated:
        view = site.get_json(f"/api/a2a-tasks/{task_id}")
        problems = evaluation_problems(view, rules.tasks[task_id])
        before = report.failures
        _view_checks(report, view)
        for problem in problems:
            report.fail(f"task {task_id}: {problem}")
        if report.failures == before:
            print(f"ok    task {task_id}: its evaluation matches its logged contributions")
    if not report.failures:
        site.home.mkdir(parents=True, exist_ok=True)
        state_file.write_text(
            json.dumps({"tree": tree.saved(), "rules": rules.saved()}), encoding="utf-8"
        )
    return _finish(report)


def _finish(report: Report) -> int:
    print("verified" if not report.failures else f"NOT VERIFIED: {report.failures} check(s) failed")
    return 0 if not report.failures else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cairn_verify.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("CAIRN_URL", DEFAULT_CAIRN_URL))
    parser.add_argument(
        "--witnesses",
        metavar="FILE",
        help="pin these witnesses (verifier keys, one a line, and `quorum <k>`) instead of the card's",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("task").add_argument("task", help="a task id, its URL or its saved JSON")
    commands.add_parser("receipt").add_argument("file", help="a receipt saved as JSON")
    commands.add_parser("log").add_argument(
        "--full", action="store_true", help="fetch every entry and recompute the root"
    )
    commands.add_parser("monitor")
    args = parser.parse_args(argv)
    home = Path(os.environ.get("CAIRN_HOME", "~/.cairn")).expanduser()
    try:
        site = Site(args.url, home, args.witnesses)
        if args.command == "task":
            return command_task(site, args.task)
        if args.command == "receipt":
            return command_receipt(site, args.file)
        if args.command == "monitor":
            return command_monitor(site)
        return command_log(site, args.full)
    except Failed as failure:
        print(f"FAIL  {failure}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
