# /// script
# requires-python = ">=3.11"
# dependencies = ["cryptography>=42", "joserfc>=1.0", "rfc8785>=0.1.4"]
# ///
"""Check a Cairn site offline, trusting nothing but the site key pinned on first use (SPEC §15.5).

    cairn_verify.py task <id | URL | saved JSON>   the task, its reports, its evaluation, all in the log
    cairn_verify.py receipt <file>                 a receipt: its signature, its contribution in the
                                                   log and in the evaluation (or proof of omission)
    cairn_verify.py log                            the latest checkpoint, consistent with the last seen

The first run saves the site's JWKS and, for `log`, each checkpoint it accepts under
CAIRN_HOME/verify/ (CAIRN_HOME defaults to ~/.cairn). Exit status 0 only when everything checks;
each failure says what does not match.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
import warnings
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from joserfc import jws
from joserfc.errors import JoseError, SecurityWarning
from joserfc.jwk import KeySet

DEFAULT_CAIRN_URL = "http://127.0.0.1:8000"
MAX_MERGE_DELAY = timedelta(seconds=60)
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


# --- Keys, signatures, checkpoints -------------------------------------------------------------


def digest(value: Any) -> str:
    return "sha256:" + hashlib.sha256(rfc8785.dumps(value)).hexdigest()


class Site:
    """The site under check: its URL, and what this verifier pinned of it."""

    def __init__(self, url: str, home: Path) -> None:
        self.url = url.rstrip("/")
        host = urllib.parse.urlsplit(self.url).netloc.replace(":", "_")
        self.home = home / "verify" / host
        self.jwks = self._pinned_jwks()

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

    def _pinned_jwks(self) -> dict[str, Any]:
        pinned = self.home / "jwks.json"
        if pinned.is_file():
            return json.loads(pinned.read_text(encoding="utf-8"))
        jwks = self.get_json("/.well-known/jwks.json")
        self.home.mkdir(parents=True, exist_ok=True)
        pinned.write_text(json.dumps(jwks, indent=2), encoding="utf-8")
        print(f"pinned the site keys of {self.url} in {pinned}")
        return jwks

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
                keys = KeySet.import_key_set(self.jwks)
                return jws.deserialize_compact(token, keys, algorithms=["EdDSA"]).payload
            except (JoseError, ValueError) as error:
                raise Failed(
                    f"the signature does not verify with the pinned site key ({error})"
                ) from None

    def checkpoint(self, text: str) -> tuple[int, bytes]:
        """(tree size, root) of a signed note whose signature verifies with a pinned key."""
        body, separator, signatures = text.partition("\n\n")
        lines = body.split("\n")
        if not separator or len(lines) < 3:
            raise Failed("the checkpoint is not a signed note")
        origin, size, root = lines[0], int(lines[1]), base64.b64decode(lines[2])
        signed = (body + "\n").encode()
        for line in signatures.splitlines():
            dash, _, rest = line.partition(" ")
            name, _, stamp = rest.partition(" ")
            if dash != "\u2014" or name != origin:
                continue
            raw = base64.b64decode(stamp)
            for public in self.ed25519_keys():
                expected_id = hashlib.sha256(name.encode() + b"\n\x01" + public).digest()[:4]
                if raw[:4] != expected_id:
                    continue
                try:
                    Ed25519PublicKey.from_public_bytes(public).verify(raw[4:], signed)
                except InvalidSignature:
                    raise Failed(f"the checkpoint's signature by {name} does not verify") from None
                return size, root
        raise Failed(f"the checkpoint carries no signature by a pinned key for {origin}")

    def latest_checkpoint(self) -> tuple[int, bytes, str]:
        status, body = self.get("/api/log/checkpoint")
        if status != 200:
            raise Failed(f"the log has no checkpoint to check ({status})")
        text = body.decode()
        size, root = self.checkpoint(text)
        return size, root, text

    def included(self, entry: dict[str, Any], size: int, root: bytes) -> int:
        """The entry's index once its inclusion under (size, root) is proven; Failed otherwise."""
        leaf = leaf_hash(rfc8785.dumps(entry))
        status, body = self.get(
            "/api/log/proof/inclusion", {"leaf_hash": leaf.hex(), "tree_size": size}
        )
        if status == 404:
            raise Failed(f"{describe(entry)} is not in the log under the checkpoint of size {size}")
        if status != 200:
            raise Failed(f"the inclusion proof for {describe(entry)} answered {status}")
        proof = json.loads(body)
        path = [bytes.fromhex(h) for h in proof["hashes"]]
        if root_from_inclusion(proof["index"], size, leaf, path) != root:
            raise Failed(
                f"the inclusion proof of {describe(entry)} does not lead to the signed root"
            )
        return proof["index"]


def sealed_as(report_digest: str, salt: str | None) -> dict[str, str]:
    """What a contribution entry holds of its report: the salted commitment (§15.2), or the bare
    digest of a contribution made before salts."""
    if salt is None:
        return {"report_digest": report_digest}
    return {"commitment": digest({"report_digest": report_digest, "salt": salt})}


def describe(entry: dict[str, Any]) -> str:
    kind = entry["type"].rsplit("/", 1)[-1]
    name = entry.get("contribution_id") or entry["task_id"]
    return f"the {kind} entry of {name}"


def instant(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


# --- The three commands ------------------------------------------------------------------------


class Report:
    def __init__(self) -> None:
        self.failures = 0

    def check(self, what: str, run: Any) -> Any:
        try:
            result = run()
        except Failed as failure:
            self.failures += 1
            print(f"FAIL  {what}: {failure}")
            return None
        print(f"ok    {what}")
        return result


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


def _evaluation_checks(report: Report, view: dict[str, Any]) -> None:
    evaluation = view["evaluation"]
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

    def input_digest() -> None:
        request = {name: view[name] for name in REQUEST_FIELDS}
        if digest(request) != view["public_input_digest"]:
            raise Failed("the task's request differs from its approved public_input_digest")

    report.check("the task's request matches its public_input_digest", input_digest)
    entries = [
        {
            "type": "cairn.log/task",
            "task_id": view["id"],
            "public_input_digest": view["public_input_digest"],
            "deadline": view["deadline"],
            "created_at": view["created_at"],
        }
    ]
    if view["evaluation"] is not None:
        _evaluation_checks(report, view)
        evaluation = view["evaluation"]
        entries += [
            {
                "type": "cairn.log/contribution",
                "task_id": view["id"],
                "contribution_id": item["contribution_id"],
                **sealed_as(item["report_digest"], item.get("salt")),
                "received_at": item["received_at"],
            }
            for item in evaluation["contributions"]
        ]
        entries.append(
            {
                "type": "cairn.log/evaluation",
                "task_id": view["id"],
                "outcome": view["outcome"],
                "evaluated_at": view["evaluated_at"],
                "evaluation_digest": digest(evaluation),
            }
        )
    else:
        print("      the task is open: its contributions stay sealed until its deadline")
    checkpoint = report.check("the latest checkpoint's signature", site.latest_checkpoint)
    if checkpoint is not None:
        size, root, _ = checkpoint
        for entry in entries:
            report.check(
                f"{describe(entry)} is in the log", lambda e=entry: site.included(e, size, root)
            )
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
    entry = {
        "type": "cairn.log/contribution",
        "task_id": claims["task_id"],
        "contribution_id": claims["contribution_id"],
        **sealed_as(claims["report_digest"], claims.get("salt")),
        "received_at": claims["received_at"],
    }
    due = instant(claims["received_at"]) + MAX_MERGE_DELAY
    checkpoint = report.check("the latest checkpoint's signature", site.latest_checkpoint)
    if checkpoint is not None:
        size, root, _ = checkpoint
        try:
            site.included(entry, size, root)
            print("ok    the contribution is in the log")
        except Failed as failure:
            report.failures += 1
            if datetime.now(UTC) < due:
                print(
                    f"FAIL  not in the log yet: {failure} (the merge delay runs until {due:%H:%M:%S}Z)"
                )
            else:
                _omission(receipt, f"{failure}, past the maximum merge delay")
    view = site.get_json(f"/api/a2a-tasks/{claims['task_id']}")
    if view["evaluation"] is None:
        print("      the task is not evaluated yet: run this again after its deadline")
        return _finish(report)
    listed = {
        item["contribution_id"]: item["report_digest"]
        for item in view["evaluation"]["contributions"]
    }
    if claims["contribution_id"] not in listed:
        report.failures += 1
        _omission(receipt, "the evaluation leaves this contribution out")
    elif listed[claims["contribution_id"]] != claims["report_digest"]:
        report.failures += 1
        _omission(receipt, "the evaluation lists this contribution with another report digest")
    else:
        print("ok    the evaluation counts it with the same report digest")
    return _finish(report)


def _omission(receipt: dict[str, Any], why: str) -> None:
    print(f"FAIL  PROOF OF OMISSION: {why}.")
    print("      This receipt is signed by the site key; anyone can check it with cairn_verify.py:")
    print("      " + json.dumps(receipt, separators=(",", ":")))


def command_log(site: Site) -> int:
    report = Report()
    checkpoint = report.check("the latest checkpoint's signature", site.latest_checkpoint)
    if checkpoint is None:
        return _finish(report)
    size, root, text = checkpoint
    seen_file = site.home / "checkpoint"
    if seen_file.is_file():
        seen_size, seen_root = site.checkpoint(seen_file.read_text(encoding="utf-8"))

        def consistent() -> None:
            path: list[bytes] = []
            if 0 < seen_size < size:
                proof = site.get_json(
                    "/api/log/proof/consistency", {"first": seen_size, "second": size}
                )
                path = [bytes.fromhex(h) for h in proof["hashes"]]
            check_consistency(seen_size, size, seen_root, root, path)

        report.check(f"the log of {size} entries extends the {seen_size} seen before", consistent)
    if not report.failures:
        site.home.mkdir(parents=True, exist_ok=True)
        seen_file.write_text(text, encoding="utf-8")
        print(f"      {size} entries, root {root.hex()}; kept as the last checkpoint seen")
    return _finish(report)


def _finish(report: Report) -> int:
    print("verified" if not report.failures else f"NOT VERIFIED: {report.failures} check(s) failed")
    return 0 if not report.failures else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cairn_verify.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("CAIRN_URL", DEFAULT_CAIRN_URL))
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("task").add_argument("task", help="a task id, its URL or its saved JSON")
    commands.add_parser("receipt").add_argument("file", help="a receipt saved as JSON")
    commands.add_parser("log")
    args = parser.parse_args(argv)
    home = Path(os.environ.get("CAIRN_HOME", "~/.cairn")).expanduser()
    try:
        site = Site(args.url, home)
        if args.command == "task":
            return command_task(site, args.task)
        if args.command == "receipt":
            return command_receipt(site, args.file)
        return command_log(site)
    except Failed as failure:
        print(f"FAIL  {failure}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
