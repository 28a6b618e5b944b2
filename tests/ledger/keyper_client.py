"""What anyone who asks a keyper does (SPEC §15.8), from the site's public routes alone: read the
task's entries and a checkpoint's size, fetch their inclusion proofs, and send the release request.
And a share sealed by hand, as anyone (a keeper forging one included) can seal bytes to a keyper."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from core.canonical import canonical_json
from ledger.keyper_seal import (
    SUITE,
    Keyper,
    ShareContext,
    b64u,
)


def log_size(site: httpx.Client) -> int:
    """The tree size of the site's latest checkpoint."""
    checkpoint = site.get("/api/log/checkpoint")
    assert checkpoint.status_code == 200, checkpoint.text
    return int(checkpoint.text.split("\n")[1])


@dataclass(frozen=True)
class Logged:
    """A task's entry and one contribution's, as `/api/log/tasks/<id>` serves them."""

    task: dict[str, Any]
    contribution: dict[str, Any]

    @property
    def deadline(self) -> str:
        return self.task["entry"]["deadline"]

    @property
    def commitment(self) -> str:
        return self.contribution["entry"]["commitment"]


def logged(site: httpx.Client, task_id: str, contribution_id: str) -> Logged:
    entries = site.get(f"/api/log/tasks/{task_id}").json()["entries"]
    task = next(item for item in entries if item["entry"]["type"] == "cairn.log/task")
    contribution = next(
        item for item in entries if item["entry"].get("contribution_id") == contribution_id
    )
    return Logged(task, contribution)


def proven(site: httpx.Client, item: dict[str, Any], size: int) -> dict[str, Any]:
    """The entry as a release request carries it: its index, JCS text and audit path."""
    proof = site.get(
        "/api/log/proof/inclusion", params={"leaf_hash": item["leaf_hash"], "tree_size": size}
    )
    assert proof.status_code == 200, proof.text
    return {
        "index": item["index"],
        "entry": canonical_json(item["entry"]).decode(),
        "proof": proof.json()["hashes"],
    }


def release_request(
    site: httpx.Client,
    origin: str,
    task_id: str,
    contribution_id: str,
    share: dict[str, Any],
    envelope: dict[str, Any],
    *,
    size: int | None = None,
) -> dict[str, Any]:
    """The request of §15.8 for one share of a sealed envelope, proven at `size` (the latest
    checkpoint's by default)."""
    size = log_size(site) if size is None else size
    found = logged(site, task_id, contribution_id)
    return {
        "site": origin,
        "task_id": task_id,
        "contribution_id": contribution_id,
        "index": share["index"],
        "threshold": envelope["threshold"],
        "sealed_share": share["sealed_share"],
        "ciphertext_digest": envelope["ciphertext_digest"],
        "size": size,
        "task_entry": proven(site, found.task, size),
        "contribution_entry": proven(site, found.contribution, size),
    }


def share_sealed(share: bytes, keyper: Keyper, context: ShareContext, *, index: int) -> str:
    """HPKE `enc ‖ ct` of a share to the keyper, bound to `context`, base64url."""
    info = context.info(keyper=keyper.name, index=index)
    return b64u(SUITE.encrypt(share, keyper.public_key(), info=info))
