"""SPEC §15.3: the log's entries, its signed checkpoints, and its proofs, through the public routes."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import uuid

import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.canonical import canonical_digest
from ledger.logs import log_first
from ledger.merkle import leaf_hash, node_hash
from ledger.models import Leaf
from ledger.notes import log_verifier_key
from ledger.selectors import inclusion_proof, log_stats
from ledger.services import log_queue, log_sequence
from ledger.signed_note import (
    ED25519,
    Note,
    NoteError,
    checkpoint_body_parse,
    note_parse,
    note_sign,
    note_signature_verify,
    verifier_key_parse,
)
from tasks.evaluation import task_evaluate
from tasks.models import Task
from tests.docs import doc_block
from tests.ledger.conftest import load_verifier

verifier = load_verifier()


def mth(leaves: list[bytes]) -> bytes:
    """RFC 9162's MTH, straight from its definition: the reference the stored tree must match."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    return node_hash(mth(leaves[:k]), mth(leaves[k:]))


def checkpoint_of(http, tmp_path) -> tuple[int, bytes]:
    site = verifier.Site(str(http.base_url), tmp_path)
    checked = site.checkpoint(http.get("/api/log/checkpoint").text)
    return checked.size, checked.root


def test_a_task_its_contributions_and_its_evaluation_are_logged_without_content(
    http, poster, post_task, make_agent, contribute, time_machine, tmp_path
):
    task = post_task(poster)
    receipts = [contribute(make_agent(), task)["receipt"] for _ in range(2)]
    time_machine.move_to(task.deadline, tick=True)
    task_evaluate(task_id=task.pk)
    task = Task.objects.get(pk=task.pk)

    assert log_sequence() == 4
    response = http.get("/api/log/checkpoint")
    entries = http.get("/api/log/entries", params={"start": 0, "end": 10}).json()["entries"]

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    size, root = checkpoint_of(http, tmp_path)
    assert response.text.splitlines()[0] == "localhost/cairn/log"
    assert size == 4
    assert [e["index"] for e in entries] == [0, 1, 2, 3]
    assert [e["entry"] for e in entries] == [
        {
            "type": "cairn.log/task",
            "task_id": str(task.id),
            "public_input_digest": task.public_input_digest,
            "deadline": task.deadline_text,
            "created_at": entries[0]["entry"]["created_at"],
        },
        *[
            {
                "type": "cairn.log/contribution",
                "task_id": str(task.id),
                "contribution_id": receipt["contribution_id"],
                "commitment": "sha256:"
                + hashlib.sha256(
                    rfc8785.dumps(
                        {"report_digest": receipt["report_digest"], "salt": receipt["salt"]}
                    )
                ).hexdigest(),
                "received_at": receipt["received_at"],
            }
            for receipt in receipts
        ],
        {
            "type": "cairn.log/evaluation",
            "task_id": str(task.id),
            "outcome": "resolved",
            "evaluated_at": entries[3]["entry"]["evaluated_at"],
            "evaluation_digest": canonical_digest(task.evaluation),
        },
    ]
    assert http.get(f"/api/log/tasks/{task.id}").json() == {"entries": entries}
    assert http.get(f"/api/log/tasks/{uuid.uuid4()}").json() == {"entries": []}
    leaves = [leaf_hash(rfc8785.dumps(e["entry"])) for e in entries]
    assert [e["leaf_hash"] for e in entries] == [leaf.hex() for leaf in leaves]
    assert root == mth(leaves)
    assert str(poster.agent.id) not in response.text + str(entries)


def test_every_proof_of_a_growing_log_checks_against_its_signed_roots(db, http, tmp_path):
    roots = {}
    for batch in (1, 2, 4, 6, 13, 11):
        log_queue({"type": "test", "n": len(roots) * 100 + i} for i in range(batch))
        log_sequence()
        size, root = checkpoint_of(http, tmp_path)
        roots[size] = root
    entries = http.get("/api/log/entries", params={"start": 0, "end": 1000}).json()["entries"]
    leaves = [bytes.fromhex(e["leaf_hash"]) for e in entries]
    assert len(leaves) == 37

    for size, root in roots.items():
        assert mth(leaves[:size]) == root
        for index in range(size):
            proof = http.get(
                "/api/log/proof/inclusion",
                params={"leaf_hash": leaves[index].hex(), "tree_size": size},
            ).json()
            path = [bytes.fromhex(h) for h in proof["hashes"]]
            assert (proof["index"], proof["tree_size"]) == (index, size)
            assert verifier.inclusion_verify(index, size, leaves[index], path, root)
        for first, first_root in roots.items():
            if first <= size:
                hashes = http.get(
                    "/api/log/proof/consistency", params={"first": first, "second": size}
                ).json()["hashes"]
                path = [bytes.fromhex(h) for h in hashes]
                verifier.check_consistency(first, size, first_root, root, path)


def test_a_proof_costs_the_same_few_queries_however_long_the_log(db):
    def queries_for_a_proof() -> int:
        log_sequence()
        leaf = Leaf.objects.order_by("index").first()
        size = Leaf.objects.count()
        with CaptureQueriesContext(connection) as queries:
            proof = inclusion_proof(leaf_hash=leaf.leaf_hash, tree_size=size, log=log_first())
        assert len(proof.hashes) == (size - 1).bit_length()
        return len(queries)

    log_queue({"type": "test", "n": i} for i in range(9))
    small = queries_for_a_proof()
    log_queue({"type": "test", "n": i} for i in range(9, 700))
    large = queries_for_a_proof()
    assert small == large <= 3


@pytest.mark.parametrize(
    "path, params",
    [
        ("/api/log/entries", {"start": 0}),
        ("/api/log/entries", {"start": -1, "end": 3}),
        ("/api/log/entries", {"start": 5, "end": 2}),
        ("/api/log/entries", {"start": "a", "end": 2}),
        ("/api/log/entries", {"start": 0, "end": 2, "page": 1}),
        ("/api/log/proof/inclusion", {"leaf_hash": "00" * 32}),
        ("/api/log/proof/inclusion", {"leaf_hash": "xyz", "tree_size": 1}),
        ("/api/log/proof/inclusion", {"leaf_hash": "00" * 32, "tree_size": 0}),
        ("/api/log/proof/inclusion", {"leaf_hash": "00" * 32, "tree_size": 4}),
        ("/api/log/proof/consistency", {"first": 0, "second": 2}),
        ("/api/log/proof/consistency", {"first": 2, "second": 1}),
        ("/api/log/proof/consistency", {"first": 1, "second": 4}),
        ("/api/log/checkpoint", {"x": 1}),
    ],
)
def test_bad_parameters_are_invalid_query(db, http, path, params):
    log_queue({"type": "test", "n": i} for i in range(3))
    log_sequence()

    response = http.get(path, params=params)

    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_query"


def test_a_leaf_not_yet_in_the_asked_tree_is_not_found(db, http):
    log_queue({"type": "test", "n": i} for i in range(3))
    log_sequence()
    log_queue([{"type": "test", "n": 3}])
    log_sequence()
    later = leaf_hash(rfc8785.dumps({"type": "test", "n": 3})).hex()

    early = http.get("/api/log/proof/inclusion", params={"leaf_hash": later, "tree_size": 3})
    unknown = http.get("/api/log/proof/inclusion", params={"leaf_hash": "ab" * 32, "tree_size": 4})
    present = http.get("/api/log/proof/inclusion", params={"leaf_hash": later, "tree_size": 4})

    assert (early.status_code, early.json()["error"]["code"]) == (404, "not_found")
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "not_found")
    assert present.json()["index"] == 3


def test_entries_are_cut_to_the_checkpointed_tree(db, http):
    log_queue({"type": "test", "n": i} for i in range(5))
    log_sequence()
    log_queue([{"type": "test", "n": 5}])  # queued, not yet integrated

    entries = http.get("/api/log/entries", params={"start": 3, "end": 100}).json()["entries"]

    assert [e["index"] for e in entries] == [3, 4]


def test_the_checkpoint_is_a_signed_note_by_the_site_key(db, http):
    log_queue([{"type": "test", "n": 0}])
    log_sequence()
    text = http.get("/api/log/checkpoint").text
    body, _, signature = text.partition("\n\n")
    origin, size, root = body.split("\n")
    dash, name, stamp = signature.rstrip("\n").split(" ")
    (key,) = http.get("/.well-known/jwks.json").json()["keys"]
    public = base64.urlsafe_b64decode(key["x"] + "=")

    assert (dash, name, size) == ("\u2014", origin, "1")
    raw = base64.b64decode(stamp)
    assert raw[:4] == hashlib.sha256(name.encode() + b"\n\x01" + public).digest()[:4]
    Ed25519PublicKey.from_public_bytes(public).verify(raw[4:], (body + "\n").encode())
    assert base64.b64decode(root) == leaf_hash(rfc8785.dumps({"type": "test", "n": 0}))


def test_log_stats_count_the_entries_and_the_oldest_wait(db, time_machine):
    time_machine.move_to("2026-12-01T06:00:00Z", tick=False)
    log_queue({"type": "test", "n": n} for n in range(3))
    log_sequence()
    log_queue([{"type": "test", "n": 3}])
    time_machine.move_to("2026-12-01T06:00:07Z", tick=False)

    assert log_stats() == (3, 7.0)
    log_sequence()
    assert log_stats() == (4, 0.0)


def test_the_served_verifier_key_verifies_the_served_checkpoint(http, poster, post_task):
    # Given a log with a signed checkpoint
    post_task(poster)
    log_sequence()

    # When a witness's operator reads the log's verifier key from the site, with no token
    served = http.get("/api/log/vkey")

    # Then it is one line of text, the C2SP key whose name is the checkpoints' origin
    assert served.status_code == 200
    assert served.headers["content-type"] == "text/plain; charset=utf-8"
    key = verifier_key_parse(served.text, type=ED25519)
    assert served.text == key.text + "\n"
    # And the served checkpoint's signature by that key verifies
    note = note_parse(http.get("/api/log/checkpoint").text)
    assert checkpoint_body_parse(note.body).origin == key.name
    note_signature_verify(note, key)
    # And a note signed by another key under the same name does not
    forged = note_sign(note.body, key.name, Ed25519PrivateKey.generate())
    with pytest.raises(NoteError):
        note_signature_verify(Note(note.body, [forged]), key)


def test_the_witness_pages_command_configures_a_witness_from_the_served_key(http, live_url):
    block = doc_block("docs/witnesses.md", "/api/log/vkey")

    said = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", f'{block}\nprintf %s "$CAIRN_WITNESSED_LOGS"'],
        env={"PATH": os.environ["PATH"], "CAIRN_URL": live_url},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert said.returncode == 0, said.stderr
    assert said.stdout == log_verifier_key().text
