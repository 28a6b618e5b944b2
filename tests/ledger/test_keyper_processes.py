"""SPEC §15.8 with real processes: a site and three keypers, each a Cairn of its own (its database,
its keys, its clock), the keypers witnessing the site's log. A report sealed to them goes through
the site's HTTP route; before the deadline plus a minute no keyper releases; after it the site's
`releases_collect` gets k of the shares with one keyper down, the key they make opens the sealed
report, and the keyper back up releases a share that agrees."""

from __future__ import annotations

import hashlib
import time
from datetime import timedelta

import httpx

from core.clock import format_instant, parse_instant
from ledger.keyper_seal import (
    b64u_decode,
    ciphertext_digest,
    key_combine,
    release_claims,
    release_verify,
    report_open,
    seal,
)
from tests.factories import contribution_report, deadline_in, open_task_payload, open_task_request
from tests.ledger.keyper_client import log_size, logged, release_request
from tests.ledger.keyper_processes import KeyperProcess

# Time enough, on a busy machine, to log the task's entry and seal to it before the deadline.
DEADLINE_S = 40


def _verified(release: dict, keyper: KeyperProcess, origin: str, task_id: str, cid: str) -> None:
    claims = release_claims(
        keyper=keyper.name,
        site=origin,
        task_id=task_id,
        contribution_id=cid,
        index=release["index"],
        share=release["share"],
        released_at=release["released_at"],
    )
    assert release_verify(claims, release["signature"], keyper.witness_key.public_key()), release


def test_three_keyper_processes_release_after_the_deadline_and_the_site_collects_them(
    keyper_site,
):
    keypers, site = keyper_site(3, threshold=2)
    http = httpx.Client(base_url=site.url, timeout=20)
    payload = open_task_payload(open_task_request(deadline=deadline_in(DEADLINE_S)))
    posted = http.post("/api/a2a-tasks", json=payload, headers=site.agent())
    assert posted.status_code == 201, posted.text
    task = posted.json()["task"]
    site.sequence()  # the task's entry, which the contributor seals to, is in the log

    task_entry = http.get(f"/api/log/tasks/{task['id']}").json()["entries"][0]
    report = contribution_report()
    sealed = seal(
        report,
        site=site.origin,
        task_id=task["id"],
        task_entry=task_entry["index"],
        deadline=task["deadline"],
        keypers=[keyper.keyper for keyper in keypers],
        threshold=2,
    )
    sent = http.post(
        f"/api/a2a-tasks/{task['id']}/contributions", json=sealed, headers=site.agent()
    )
    assert sent.status_code == 201, sent.text
    contribution_id = sent.json()["receipt"]["contribution_id"]
    site.sequence()

    # Every keyper cosigned the site's checkpoint, and serves it as its latest of that log.
    size = log_size(http)
    note = http.get("/api/log/checkpoint").text
    path = f"/api/witness/{hashlib.sha256(site.origin.encode()).hexdigest()}/checkpoint"
    for keyper in keypers:
        assert f"\u2014 {keyper.name} " in note
        served = httpx.get(f"{keyper.url}{path}")
        assert served.status_code == 200 and served.text.split("\n")[1] == str(size)

    found = logged(http, task["id"], contribution_id)
    assert found.commitment == sealed["commitment"]
    envelope = {
        "threshold": 2,
        "ciphertext_digest": ciphertext_digest(b64u_decode(sealed["ciphertext"])),
    }
    deadline = parse_instant(found.deadline)
    not_before = format_instant(deadline + timedelta(seconds=60))
    for keyper, share in zip(keypers, sealed["shares"], strict=True):
        request = release_request(http, site.origin, task["id"], contribution_id, share, envelope)
        early = httpx.post(f"{keyper.url}/api/keyper/release", json=request)
        assert early.status_code == 425 and early.json() == {"not_before": not_before}
    assert site.releases_collect(contribution_id) == []

    time.sleep(max(0.0, (deadline + timedelta(seconds=60.5)).timestamp() - time.time()))
    keypers[2].stop()
    releases = site.releases_collect(contribution_id)
    assert [(r["keyper"], r["index"]) for r in releases] == [
        (keypers[0].name, 1),
        (keypers[1].name, 2),
    ]
    for release, keyper in zip(releases, keypers, strict=False):
        _verified(release, keyper, site.origin, task["id"], contribution_id)
        assert parse_instant(release["released_at"]) >= parse_instant(not_before)
    key = key_combine([(r["index"], b64u_decode(r["share"])) for r in releases], 2)
    opened, _ = report_open(
        b64u_decode(sealed["ciphertext"]),
        key,
        site=site.origin,
        task_id=task["id"],
        deadline=found.deadline,
        commitment=found.commitment,
    )
    assert opened == report

    # The third keyper back up: only it is asked, and its share agrees with the other two.
    keypers[2].serve()
    keypers[2].ready()
    everything = site.releases_collect(contribution_id, kept=releases)
    assert everything[:2] == releases and everything[2]["keyper"] == keypers[2].name
    _verified(everything[2], keypers[2], site.origin, task["id"], contribution_id)
    assert key_combine([(r["index"], b64u_decode(r["share"])) for r in everything], 2) == key

    # Asked again, a keyper gives the same bytes: the release the site collected.
    request = release_request(
        http, site.origin, task["id"], contribution_id, sealed["shares"][0], envelope
    )
    again = httpx.post(f"{keypers[0].url}/api/keyper/release", json=request).json()
    assert {**again, "index": 1} == releases[0]
    http.close()
