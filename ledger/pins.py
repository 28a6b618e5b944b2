"""What a reader pins of a site's card's verifiable extension (SPEC §15.5, §15.7, §16.2), as
`CAIRN_HOME/verify/<host>/witnesses.json` keeps it; built into the verifier and the local MCP server
alike (`core.amalgam`), so both trust the same parties."""

from __future__ import annotations

import base64
import urllib.parse
from dataclasses import dataclass
from typing import Any

from ledger.signed_note import COSIGNATURE_V1, VerifierKey, verifier_key_parse


def card_trust(params: dict[str, Any]) -> dict[str, Any]:
    """What the params of the card's `urn:cairn:verifiable:v1` extension name, as pinned."""
    witnesses = params.get("witnesses", [])
    keypers = [
        {"name": k["name"], "hpke_key": k["hpke_key"], "url": k["url"]}
        for k in params.get("keypers", [])
    ]
    return {
        "keys": [w["key"] for w in witnesses],
        "quorum": int(params.get("witness_quorum", len(witnesses))),
        "urls": {w["name"]: w["url"] for w in witnesses},
        "keypers": keypers,
        "keyper_threshold": int(params.get("keyper_threshold", 0)) if keypers else 0,
    }


@dataclass(frozen=True)
class LogListed:
    """`path` is where its routes are served (`/api/log` for log 0, `/api/log/<n>` after)."""

    origin: str
    path: str


def logs_listed(params: dict[str, Any]) -> list[LogListed]:
    """The logs the card lists, oldest first. ValueError when it lists one it does not say how
    to read: a reader that skipped it could not find the entries written there."""
    listed = params.get("logs")
    if not isinstance(listed, list):
        return []
    logs = []
    for log in listed:
        checkpoint = log.get("checkpoint") if isinstance(log, dict) else None
        path = urllib.parse.urlsplit(str(checkpoint or "")).path
        if not path.endswith("/checkpoint") or not isinstance(log.get("origin"), str):
            raise ValueError(f"the site's card lists a log it does not say how to read: {log}")
        logs.append(LogListed(log["origin"], path.removesuffix("/checkpoint")))
    return logs


def pins_completed(pinned: dict[str, Any], card: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The pins with the URLs of the pinned witnesses the card names (a pinned URL wins), and its
    keypers and threshold the first time it lists any; and whether keypers were pinned just now."""
    names = {key.split("+", 1)[0] for key in pinned["keys"]}
    completed = {
        **pinned,
        "urls": {**{n: u for n, u in card["urls"].items() if n in names}, **pinned.get("urls", {})},
    }
    keypers_pinned_now = not pinned.get("keypers") and bool(card["keypers"])
    if keypers_pinned_now:
        completed |= {"keypers": card["keypers"], "keyper_threshold": card["keyper_threshold"]}
    completed.setdefault("keypers", [])
    completed.setdefault("keyper_threshold", 0)
    return completed, keypers_pinned_now


def keypers_differ(pinned: dict[str, Any], card: dict[str, Any]) -> bool:
    """Whether a card names other keypers (by name and key, in order) or threshold than pinned:
    sealing to them would trust parties nobody pinned."""
    ours = [(k["name"], k["hpke_key"]) for k in pinned["keypers"]]
    theirs = [(k["name"], k["hpke_key"]) for k in card["keypers"]]
    return bool(theirs) and (
        ours != theirs or pinned["keyper_threshold"] != card["keyper_threshold"]
    )


def witness_key(text: str) -> VerifierKey:
    """A pinned witness's C2SP `tlog-cosignature` verifier key; NoteError when it is not one."""
    return verifier_key_parse(text, type=COSIGNATURE_V1)


def site_keys(jwks: dict[str, Any]) -> list[bytes]:
    """The pinned JWKS's Ed25519 keys: those a checkpoint's site signature may be by."""
    return [
        base64.urlsafe_b64decode(key["x"] + "=" * (-len(key["x"]) % 4))
        for key in jwks.get("keys", [])
        if key.get("kty") == "OKP" and key.get("crv") == "Ed25519"
    ]
