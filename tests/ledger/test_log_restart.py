"""SPEC §16.2: the way out after the database went back. `manage.py log_restart` starts a new log
whose first entry records the old log's last witnessed checkpoint and the first index the
database lost; the queued entries follow it, writes are taken again into the new log, witnesses
cosign it from size 1, and the old log keeps being served byte for byte."""

from __future__ import annotations

import base64
import io
from typing import Any

import httpx
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from core.canonical import canonical_json
from ledger import log_state
from ledger.jobs import sequence_log
from ledger.logs import log_first, log_numbered, origin_numbered
from ledger.merkle import inclusion_verify, leaf_hash
from ledger.models import Checkpoint
from ledger.notes import log_origin, log_verifier_key
from ledger.selectors import entries_range
from ledger.signed_note import note_parse, note_signature_verify
from tests.ledger.keeper import log_rolled_back
from tests.ledger.test_rollback import _grown


def _restarted() -> str:
    out = io.StringIO()
    call_command("log_restart", stdout=out)
    return out.getvalue()


def _card_verifiable(http: httpx.Client) -> dict[str, Any]:
    card = http.get("/.well-known/agent-card.json").json()
    (verifiable,) = [
        e for e in card["capabilities"]["extensions"] if e["uri"] == "urn:cairn:verifiable:v1"
    ]
    params: dict[str, Any] = verifiable["params"]
    return params


def _tree(note: str) -> tuple[str, int, bytes]:
    origin, size, root = note_parse(note).body.split("\n")[:3]
    return origin, int(size), base64.b64decode(root)


@pytest.mark.django_db(transaction=True)
def test_a_restarted_log_records_what_was_lost_and_takes_writes_again(
    http, live_url, witnessed, poster, post_task, make_agent, contribute
):
    witnesses = witnessed()
    _grown(280, "first")
    sequence_log()
    _grown(40, "second")
    sequence_log()
    assert all(w.cosigned_size() == 320 for w in witnesses)
    promised = http.get("/api/log/checkpoint").text
    full_tiles = ["/api/log/tile/0/000", "/api/log/tile/entries/000"]
    served_before = {url: http.get(url).content for url in full_tiles}

    # Restored from a backup taken at 290 entries, with two writes answered but not integrated.
    log_rolled_back(290)
    queued_task = post_task(poster)
    queued_receipt = contribute(make_agent("early"), queued_task)["receipt"]
    sequence_log()
    assert log_state.rollback_found() is not None
    assert http.get("/readyz").json()["checks"]["log"]["ok"] is False
    old_urls = [
        "/api/log/checkpoint",
        *full_tiles,
        "/api/log/tile/0/001.p/24",
        "/api/log/tile/entries/001.p/24",
        "/api/log/entries?start=250&end=290",
        "/api/log/proof/consistency?first=100&second=280",
    ]
    served = {url: http.get(url) for url in old_urls}
    assert all(answer.status_code == 200 for answer in served.values())
    assert {url: served[url].content for url in full_tiles} == served_before

    # The card the server gave before the restart lists the one log; after it, both.
    first_log = {
        "origin": log_origin(),
        "checkpoint": f"{live_url}/api/log/checkpoint",
        "tiles": f"{live_url}/api/log/tile/",
    }
    assert _card_verifiable(http)["logs"] == [first_log]

    origin = origin_numbered(1)
    for witness in witnesses:  # their operators follow the new origin, as the command asks
        witness.stop()
        witness.start(origins=(origin,))
    printed = _restarted()

    assert f"started {origin}" in printed
    assert (
        "lost_from 290: the previous checkpoint held 320 entries, 30 of them past what this database logged"
        in printed
    )
    assert "logged again 2 queued entries" in printed
    assert log_verifier_key(origin).text in printed
    entries = http.get("/api/log/1/entries?start=0&end=10").json()["entries"]
    assert entries[0]["entry"] == {
        "type": "cairn.log/restart",
        "previous_origin": log_origin(),
        "previous_checkpoint": promised,
        "lost_from": 290,
    }
    assert [e["entry"]["type"] for e in entries[1:]] == ["cairn.log/task", "cairn.log/contribution"]
    assert entries[2]["entry"]["contribution_id"] == queued_receipt["contribution_id"]
    assert all(w.cosigned_size(origin) == 3 for w in witnesses)
    assert all(w.cosigned_size() == 320 for w in witnesses), "the old log is left as it was"

    # Writes are taken again, into the new log, and witnessed there.
    assert log_state.rollback_found() is None
    task = post_task(poster)
    receipt = contribute(make_agent("late"), task)["receipt"]
    sequence_log()
    logged = http.get(f"/api/log/1/tasks/{task.pk}").json()["entries"]
    assert [e["index"] for e in logged] == [3, 4]
    assert logged[1]["entry"]["contribution_id"] == receipt["contribution_id"]
    note = http.get("/api/log/1/checkpoint").text
    checked_origin, size, root = _tree(note)
    assert (checked_origin, size) == (origin, 5)
    note_signature_verify(note_parse(note), log_verifier_key(origin))
    assert all(w.cosigned_size(origin) == 5 for w in witnesses)
    proof = http.get(
        "/api/log/1/proof/inclusion",
        params={"leaf_hash": logged[1]["leaf_hash"], "tree_size": 5},
    ).json()
    assert logged[1]["leaf_hash"] == leaf_hash(canonical_json(logged[1]["entry"])).hex()
    hashes = [bytes.fromhex(h) for h in proof["hashes"]]
    assert inclusion_verify(4, 5, bytes.fromhex(logged[1]["leaf_hash"]), hashes, root)
    assert http.get("/api/log/1/tile/entries/000.p/5").status_code == 200

    # The old log is served as it was; its writes are not in it.
    assert {url: http.get(url).content for url in old_urls} == {
        url: answer.content for url, answer in served.items()
    }
    assert http.get(f"/api/log/tasks/{task.pk}").json()["entries"] == []
    assert http.get("/api/log/2/checkpoint").status_code == 404
    assert http.get("/readyz").json()["checks"]["log"] == {"ok": True}

    verifiable = _card_verifiable(http)
    assert verifiable["checkpoint"] == f"{live_url}/api/log/1/checkpoint"
    assert verifiable["logs"] == [
        first_log,
        {
            "origin": origin,
            "checkpoint": f"{live_url}/api/log/1/checkpoint",
            "tiles": f"{live_url}/api/log/1/tile/",
        },
    ]


@pytest.mark.django_db
def test_log_restart_is_refused_while_the_log_has_not_gone_back():
    _grown(4, "fine")

    with pytest.raises(CommandError, match="the log has not gone back"):
        _restarted()


@pytest.mark.django_db
def test_without_witnesses_the_restart_records_the_last_checkpoint_the_site_signed():
    _grown(2, "signed")
    _grown(4, "signed")
    signed = Checkpoint.objects.get(log=0, tree_size=6).note
    log_rolled_back(3)
    _grown(1, "queued")  # the sequencer finds the rollback; the entry stays queued
    assert log_state.rollback_found() is not None

    _restarted()
    _grown(2, "after")

    log = log_numbered(1)
    entries = [e["entry"] for e in entries_range(start=0, end=10, log=log)]
    assert entries[0] == {
        "type": "cairn.log/restart",
        "previous_origin": log_origin(),
        "previous_checkpoint": signed,
        "lost_from": 3,
    }
    assert [e["tag"] for e in entries[1:]] == ["queued", "after", "after"]
    assert Checkpoint.objects.filter(log=1).latest().tree_size == 4
    assert [e["entry"]["tag"] for e in entries_range(start=0, end=10, log=log_first())] == [
        "signed"
    ] * 2
    with pytest.raises(CommandError, match="has not gone back"):
        _restarted()
