"""Cairn as a keyper (SPEC §15.8), through `GET /api/keyper` and `POST /api/keyper/release` of a
live server that is at once the site (its log, its sequencer) and its own witness and keyper.

Every request is built from the site's public routes only (`tests/ledger/keyper_client.py`), as
anyone who asks a keyper builds it; a keeper's forgeries are those requests, changed."""

from __future__ import annotations

import hashlib
import json
import logging
import subprocess
import sys
import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from core.canonical import canonical_json
from core.clock import format_instant, parse_instant
from ledger.keyper_seal import (
    SUITE_NAME,
    Keyper,
    ShareContext,
    b64u,
    b64u_decode,
    key_combine,
    keyper_public,
    release_claims,
    release_verify,
    report_open,
    seal,
    share_open,
)
from ledger.models import CosignedCheckpoint, KeyperRelease
from ledger.notes import log_origin, log_verifier_key
from ledger.releases import releases_collect
from ledger.services import log_sequence
from ledger.signed_note import (
    COSIGNATURE_V1,
    cosignature_verify,
    note_parse,
    private_verifier_key,
    verifier_key_parse,
)
from ledger.witness import witness_verifier_key
from ledger.witnesses import witnesses_cosign
from tasks.models import Contribution, Task
from tests.conftest import postgres_only
from tests.deploy.postgres import free_port
from tests.deploy.processes import ROOT, cairn_env
from tests.factories import contribution_payload, contribution_report
from tests.keypers import logged_entry
from tests.ledger.keyper_client import (
    Logged,
    log_size,
    logged,
    proven,
    release_request,
    share_sealed,
)

NAME = "keyper.test/k1"
OTHER = "keyper.test/k2"
RELEASE = "/api/keyper/release"


def _pem(key: Ed25519PrivateKey | X25519PrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


@dataclass
class KeyperSelf:
    """The live server's own keyper, and a second keyper whose key only the test holds."""

    url: str
    witness_key: Ed25519PrivateKey
    keyper_key: X25519PrivateKey
    other_key: X25519PrivateKey
    other_url: str

    @property
    def keyper(self) -> Keyper:
        return Keyper(NAME, keyper_public(self.keyper_key), f"{self.url}/api/keyper")

    @property
    def other(self) -> Keyper:
        return Keyper(OTHER, keyper_public(self.other_key), self.other_url)


@pytest.fixture
def keyper(settings, live_url) -> KeyperSelf:
    """The site witnesses its own log as `NAME` and is that witness's keyper; `OTHER` is listed
    as a second keyper and witness, with nothing listening at its URL."""
    made = KeyperSelf(
        live_url,
        Ed25519PrivateKey.generate(),
        X25519PrivateKey.generate(),
        X25519PrivateKey.generate(),
        f"http://127.0.0.1:{free_port()}/api/keyper",
    )
    settings.CAIRN_WITNESS_SIGNING_KEY = _pem(made.witness_key)
    settings.CAIRN_WITNESS_NAME = NAME
    settings.CAIRN_WITNESSED_LOGS = [log_verifier_key().text]
    settings.CAIRN_KEYPER_KEY = _pem(made.keyper_key)
    other_witness = Ed25519PrivateKey.generate()
    settings.CAIRN_WITNESSES = [
        {"name": NAME, "key": witness_verifier_key().text, "url": f"{live_url}/api/witness"},
        {
            "name": OTHER,
            "key": private_verifier_key(OTHER, other_witness, type=COSIGNATURE_V1).text,
            "url": made.other.url,
        },
    ]
    settings.CAIRN_WITNESS_QUORUM = 1
    settings.CAIRN_KEYPERS = [
        {"name": k.name, "hpke_key": k.hpke_key, "url": k.url} for k in (made.keyper, made.other)
    ]
    settings.CAIRN_KEYPER_THRESHOLD = 2
    return made


@dataclass
class Case:
    """A task with a contribution sealed to both keypers through the HTTP route, logged and
    cosigned; `envelope` is what the site kept of it (`Contribution.keyper_seal`)."""

    task_id: str
    contribution_id: str
    found: Logged
    envelope: dict[str, Any]
    report: dict[str, Any]

    @property
    def deadline(self):
        return parse_instant(self.found.deadline)

    def share(self, index: int) -> dict[str, Any]:
        return self.envelope["shares"][index - 1]


def _sequenced() -> None:
    """One sequencer run as a worker does it: integrate and sign, then ask the witnesses."""
    log_sequence()
    witnesses_cosign()


def _sealed_contribution(http, keyper: KeyperSelf, task: Task, by, report: dict) -> str:
    """Seal `report` to both keypers as a contributor does and send it; its contribution id."""
    payload = seal(
        report,
        site=log_origin(),
        task_id=str(task.pk),
        task_entry=logged_entry(task),
        deadline=task.deadline_text,
        keypers=[keyper.keyper, keyper.other],
        threshold=2,
    )
    sent = http.post(f"/api/a2a-tasks/{task.pk}/contributions", json=payload, headers=by.headers)
    assert sent.status_code == 201, sent.text
    assert sent.json()["receipt"]["commitment"] == payload["commitment"]
    return sent.json()["receipt"]["contribution_id"]


@pytest.fixture
def case(keyper, http, poster, post_task, make_agent) -> Case:
    task = post_task(poster)
    report = contribution_report()
    contribution_id = _sealed_contribution(http, keyper, task, make_agent(), report)
    _sequenced()
    found = logged(http, str(task.pk), contribution_id)
    envelope = Contribution.objects.get(id=contribution_id).keyper_seal
    assert found.commitment == envelope["commitment"]
    return Case(str(task.pk), contribution_id, found, envelope, report)


def _request(http, case: Case, index: int = 1, **changes: Any) -> dict[str, Any]:
    request = release_request(
        http, log_origin(), case.task_id, case.contribution_id, case.share(index), case.envelope
    )
    return {**request, **changes}


def _ask(http, request: dict[str, Any]):
    return http.post(RELEASE, content=json.dumps(request).encode())


def _refused(response, status: int, code: str, path: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code, error
    if path is not None:
        assert error["issues"][0]["path"] == path, error
    return error


def _after_the_time(time_machine, case: Case, seconds: float = 60) -> None:
    time_machine.move_to(case.deadline + timedelta(seconds=seconds), tick=True)


def test_a_keyper_describes_itself(http, keyper):
    described = http.get("/api/keyper")
    assert described.status_code == 200
    assert described.json() == {
        "name": NAME,
        "hpke_key": keyper_public(keyper.keyper_key),
        "suite": SUITE_NAME,
        "logs": [log_origin()],
    }
    assert http.post("/api/keyper").status_code == 405
    assert http.get(RELEASE).status_code == 405


def test_without_a_keyper_key_or_a_witness_key_both_routes_are_unknown(http, keyper, settings):
    for off in ("CAIRN_KEYPER_KEY", "CAIRN_WITNESS_SIGNING_KEY"):
        kept = getattr(settings, off)
        setattr(settings, off, "")
        for response in (http.get("/api/keyper"), http.post(RELEASE, content=b"{}")):
            _refused(response, 404, "not_found")
        setattr(settings, off, kept)


def test_a_share_is_released_from_the_deadline_plus_a_minute_the_same_bytes_every_time(
    http, keyper, case, time_machine, post_task, make_agent
):
    request = _request(http, case)
    not_before = format_instant(case.deadline + timedelta(seconds=60))
    early = _ask(http, request)
    assert early.status_code == 425, early.text
    assert early.json() == {"not_before": not_before}
    assert 1800 < int(early.headers["Retry-After"]) <= 3660

    time_machine.move_to(case.deadline + timedelta(seconds=59.9), tick=False)
    assert _ask(http, request).json() == {"not_before": not_before}
    assert not KeyperRelease.objects.exists()

    time_machine.move_to(case.deadline + timedelta(seconds=60), tick=False)
    first = _ask(http, request)
    assert first.status_code == 200, first.text
    assert first.headers["Content-Type"] == "application/json"
    release = first.json()
    assert set(release) == {"keyper", "share", "released_at", "signature"}
    assert release["keyper"] == NAME and release["released_at"] == not_before
    claims = release_claims(
        keyper=NAME,
        site=log_origin(),
        task_id=case.task_id,
        contribution_id=case.contribution_id,
        index=1,
        share=release["share"],
        released_at=release["released_at"],
    )
    assert release_verify(claims, release["signature"], keyper.witness_key.public_key())

    # With the other keyper's share the key opens the report the log committed to.
    context = ShareContext(
        site=log_origin(),
        task_id=case.task_id,
        task_entry=case.found.task["index"],
        deadline=case.found.deadline,
        commitment=case.found.commitment,
        ciphertext_digest=case.envelope["ciphertext_digest"],
        threshold=2,
    )
    other = share_open(
        b64u_decode(case.share(2)["sealed_share"]), keyper.other_key, context, keyper=OTHER, index=2
    )
    key = key_combine([(1, b64u_decode(release["share"])), (2, other)], 2)
    report, _ = report_open(
        b64u_decode(case.envelope["ciphertext"]),
        key,
        site=log_origin(),
        task_id=case.task_id,
        deadline=case.found.deadline,
        commitment=case.found.commitment,
    )
    assert report == case.report

    time_machine.move_to(case.deadline + timedelta(hours=5), tick=True)
    post_task(make_agent())
    _sequenced()  # a later checkpoint: the same release, proven at another size
    again = _ask(http, _request(http, case))
    assert again.content == first.content
    assert KeyperRelease.objects.count() == 1


def test_entries_and_roots_the_keyper_did_not_cosign_are_refused_before_the_time_and_after(
    http, keyper, case, poster, post_task, make_agent, contribute, time_machine
):
    other_task = post_task(poster)
    elsewhere = contribute(make_agent(), other_task, contribution_payload())["receipt"]
    task = Task.objects.get(pk=case.task_id)
    beside = contribute(make_agent(), task, contribution_payload())["receipt"]
    _sequenced()
    size = log_size(http)
    request = _request(http, case)  # at the new size, which the keyper cosigned
    other = logged(http, str(other_task.pk), elsewhere["contribution_id"])
    neighbour = logged(http, case.task_id, beside["contribution_id"])
    task_entry = request["task_entry"]
    earlier = {
        **json.loads(task_entry["entry"]),
        "deadline": format_instant(case.deadline - timedelta(minutes=50)),
    }
    forgeries = {
        "a task entry with an earlier deadline": (
            {"task_entry": {**task_entry, "entry": canonical_json(earlier).decode()}},
            "task_entry",
        ),
        "another task's entry": ({"task_entry": proven(http, other.task, size)}, "task_entry"),
        "another task's contribution": (
            {"contribution_entry": proven(http, other.contribution, size)},
            "contribution_entry",
        ),
        "another contribution of the task": (
            {"contribution_entry": proven(http, neighbour.contribution, size)},
            "contribution_entry",
        ),
        "the task entry as the contribution's": (
            {"contribution_entry": task_entry},
            "contribution_entry",
        ),
        "the contribution entry as the task's": (
            {"task_entry": request["contribution_entry"]},
            "task_entry",
        ),
        "a proof off the root": (
            {"task_entry": {**task_entry, "proof": [task_entry["proof"][0][::-1]]}},
            "task_entry",
        ),
        "the right proof at another index": (
            {"task_entry": {**task_entry, "index": task_entry["index"] + 1}},
            "task_entry",
        ),
        "a size never cosigned": ({"size": size - 1}, "size"),
        "a size beyond the log": ({"size": size + 1}, "size"),
    }
    post_task(make_agent())
    log_sequence()  # a checkpoint the witness has not seen: the site serves proofs at its size
    unseen = log_size(http)
    assert unseen > size
    forgeries["a checkpoint the keyper has not cosigned yet"] = (
        {
            "size": unseen,
            "task_entry": proven(http, case.found.task, unseen),
            "contribution_entry": proven(http, case.found.contribution, unseen),
        },
        "size",
    )
    for moment in (None, case.deadline + timedelta(seconds=61)):
        if moment is not None:
            time_machine.move_to(moment, tick=True)
        for forgery, (changes, path) in forgeries.items():
            response = _ask(http, {**request, **changes})
            assert response.status_code == 422, (forgery, response.text)
            _refused(response, 422, "not_proven", path)
    assert not KeyperRelease.objects.exists()
    assert _ask(http, request).status_code == 200


def test_a_share_sealed_for_anything_else_does_not_open(http, keyper, case, time_machine):
    _after_the_time(time_machine, case)
    request = _request(http, case)
    values = {
        "site": log_origin(),
        "task_id": case.task_id,
        "task_entry": case.found.task["index"],
        "deadline": case.found.deadline,
        "commitment": case.found.commitment,
        "ciphertext_digest": case.envelope["ciphertext_digest"],
        "threshold": 2,
    }
    share = bytes(16)

    def sealed(index: int = 1, name: str = NAME, **changed: Any) -> str:
        target = Keyper(name, keyper.keyper.hpke_key, keyper.keyper.url)
        return share_sealed(share, target, ShareContext(**{**values, **changed}), index=index)

    earlier = format_instant(case.deadline - timedelta(minutes=30))
    cases = {
        "another task": {"sealed_share": sealed(task_id="0b6f1a3e-3d0e-4a38-9d5e-2a3c7b8e9f10")},
        "an earlier deadline": {"sealed_share": sealed(deadline=earlier)},
        "another task entry": {"sealed_share": sealed(task_entry=values["task_entry"] + 1)},
        "another commitment": {"sealed_share": sealed(commitment="sha256:" + "0" * 64)},
        "another index": {"sealed_share": sealed(index=2)},
        "another keyper's name": {"sealed_share": sealed(name=OTHER)},
        "asked as another index": {"index": 2},
        "asked with another threshold": {"threshold": 3},
        "asked with another ciphertext digest": {"ciphertext_digest": "sha256:" + "1" * 64},
        "another keyper's share": {"sealed_share": case.share(2)["sealed_share"]},
    }
    for name, changes in cases.items():
        response = _ask(http, {**request, **changes})
        assert response.status_code == 403, (name, response.text)
        _refused(response, 403, "share_does_not_open")
    assert not KeyperRelease.objects.exists()


def test_a_share_forged_and_asked_first_does_not_stand_for_the_contributors(
    http, keyper, case, time_machine
):
    """Anyone can seal bytes to the keyper's key with a real contribution's `info`; the release
    of the contributor's own sealed share is still its own."""
    _after_the_time(time_machine, case)
    context = ShareContext(
        site=log_origin(),
        task_id=case.task_id,
        task_entry=case.found.task["index"],
        deadline=case.found.deadline,
        commitment=case.found.commitment,
        ciphertext_digest=case.envelope["ciphertext_digest"],
        threshold=2,
    )
    forged = share_sealed(bytes(16), keyper.keyper, context, index=1)
    request = _request(http, case)
    assert _ask(http, {**request, "sealed_share": forged}).json()["share"] == b64u(bytes(16))
    genuine = _ask(http, request)
    assert genuine.status_code == 200 and genuine.json()["share"] != b64u(bytes(16))
    assert _ask(http, request).content == genuine.content


def test_a_log_the_keyper_does_not_follow_is_not_found(http, keyper, case):
    request = _request(http, case, site="elsewhere.example/cairn/log")
    _refused(_ask(http, request), 404, "not_found")


def test_a_contribution_entry_in_another_log_must_be_in_a_later_log_of_the_site_it_follows(
    http, keyper, case, time_machine
):
    _after_the_time(time_machine, case)
    request = _request(http, case)
    for origin, status, code, path in (
        (log_origin(), 422, "not_proven", "contribution_entry.origin"),  # the task's own log
        ("elsewhere.example/cairn/log/1", 422, "not_proven", "contribution_entry.origin"),
        (f"{log_origin()}/1", 404, "not_found", None),  # a later log it does not follow
    ):
        elsewhere = {**request["contribution_entry"], "origin": origin, "size": request["size"]}
        asked = _ask(http, {**request, "contribution_entry": elsewhere})
        _refused(asked, status, code, path)


def _set(request: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    changed = json.loads(json.dumps(request))
    *parents, last = path.split(".")
    target = changed
    for name in parents:
        target = target[name]
    if value is _DROP:
        del target[last]
    else:
        target[last] = value
    return changed


_DROP = object()


@pytest.mark.parametrize(
    "path, value",
    [
        ("site", 7),
        ("site", ""),
        ("task_id", None),
        ("contribution_id", _DROP),
        ("index", 0),
        ("index", True),
        ("index", 1.0),
        ("index", 256),
        ("threshold", "2"),
        ("sealed_share", "not base64url!"),
        ("sealed_share", b64u(bytes(63))),
        ("sealed_share", b64u(bytes(64)) + "="),
        ("ciphertext_digest", "sha256:" + "A" * 64),
        ("ciphertext_digest", "sha256:abc"),
        ("size", 0),
        ("size", 2**63),
        ("size", -1),
        ("task_entry", []),
        ("task_entry.index", -1),
        ("task_entry.entry", {"type": "cairn.log/task"}),
        ("task_entry.proof", "0" * 64),
        ("task_entry.proof", ["0" * 64] * 64),
        ("contribution_entry.proof", ["F" * 64]),
        ("contribution_entry.extra", 1),
        ("contribution_entry.entry", _DROP),
        ("extra", {}),
    ],
)
def test_a_malformed_request_is_refused_naming_its_field(http, keyper, case, path, value):
    request = _set(_request(http, case), path, value)
    expected = path
    if path == "contribution_entry.proof":
        expected = "contribution_entry.proof[0]"
    _refused(_ask(http, request), 400, "malformed", expected)


@pytest.mark.parametrize("body", [b"", b"not json", b"[]", b'"text"', b"\xff\xfe", b"{"])
def test_a_body_that_is_not_a_json_object_is_malformed(http, keyper, body):
    _refused(http.post(RELEASE, content=body), 400, "malformed", "")


def test_a_body_over_the_limit_is_too_large(http, keyper):
    response = http.post(RELEASE, content=b" " * (1024 * 1024))
    _refused(response, 413, "payload_too_large")
    chunked = http.post(RELEASE, content=iter([b" " * 65536] * 16))
    assert chunked.status_code == 413, chunked.text


def _checkpoint_path(origin: str) -> str:
    return f"/api/witness/{hashlib.sha256(origin.encode()).hexdigest()}/checkpoint"


def test_the_witness_serves_the_latest_checkpoint_it_cosigned_of_each_log(
    http, keyper, poster, post_task
):
    path = _checkpoint_path(log_origin())
    _refused(http.get(path), 404, "not_found")  # followed, never cosigned
    _refused(http.get(_checkpoint_path("elsewhere.example/cairn/log")), 404, "not_found")
    _refused(http.get("/api/witness/not-a-digest/checkpoint"), 404, "not_found")
    witness = verifier_key_parse(witness_verifier_key().text, type=COSIGNATURE_V1)

    for _ in range(2):
        post_task(poster)
        _sequenced()
        served = http.get(path)
        assert served.status_code == 200
        assert served.headers["Content-Type"].startswith("text/plain")
        note = note_parse(served.text)
        assert note.body.split("\n")[:2] == [log_origin(), str(log_size(http))]
        assert log_verifier_key().name in [s.name for s in note.signatures]
        cosignature = note.signed_by(witness)
        assert cosignature is not None
        cosignature_verify(note.body, cosignature, witness)
    # The same checkpoint cosigned again (old size = its size) keeps the one row of its size.
    size = log_size(http)
    again = http.post(
        "/api/witness/add-checkpoint",
        content=f"old {size}\n\n{http.get('/api/log/checkpoint').text}".encode(),
    )
    assert again.status_code == 200, again.text
    assert CosignedCheckpoint.objects.filter(origin=log_origin()).count() == 2
    assert http.get(path).text == served.text
    assert http.post(path, content=b"").status_code == 405


def test_releases_are_collected_from_the_keypers_that_answer_with_a_valid_release(
    http, keyper, case, settings, time_machine, caplog, make_agent
):
    """`releases_collect`: the keyper that cosigned releases and the one that never cosigned is
    not asked; a keyper already released is not asked again; a release signed by a key other
    than its witness key is not kept."""
    task = Task.objects.get(pk=case.task_id)
    later = _sealed_contribution(http, keyper, task, make_agent(), contribution_report())
    _sequenced()
    contribution = Contribution.objects.get(id=case.contribution_id)
    caplog.set_level(logging.INFO, logger="ledger.releases")

    assert releases_collect(contribution) == []  # before the time: 425
    early = [r for r in caplog.records if NAME in r.message]
    assert early and "425" in early[0].message and early[0].levelno == logging.INFO

    _after_the_time(time_machine, case)
    caplog.clear()
    releases = releases_collect(contribution)
    assert [(r["keyper"], r["index"]) for r in releases] == [(NAME, 1)]
    assert list(releases[0]) == ["keyper", "index", "share", "released_at", "signature"]
    asked = http.post(RELEASE, content=json.dumps(_request(http, case)).encode()).json()
    assert releases[0] == {**asked, "index": 1}
    skipped = [r for r in caplog.records if OTHER in r.message]
    assert skipped and "has cosigned no checkpoint" in skipped[0].message

    contribution.releases = releases
    assert releases_collect(contribution) == releases
    assert KeyperRelease.objects.count() == 1

    # Another contribution, whose release the keyper signs with a key the site does not know.
    settings.CAIRN_WITNESS_SIGNING_KEY = _pem(Ed25519PrivateKey.generate())
    caplog.clear()
    assert releases_collect(Contribution.objects.get(id=later)) == []
    refused = [r for r in caplog.records if NAME in r.message]
    assert refused[0].levelno == logging.WARNING and "does not verify" in refused[0].message


@postgres_only()
def test_identical_requests_racing_give_one_release_and_the_same_bytes(
    http, keyper, case, time_machine, live_url
):
    _after_the_time(time_machine, case)
    body = json.dumps(_request(http, case)).encode()
    answers: list[bytes] = []
    start = threading.Barrier(8)

    def ask() -> None:
        with httpx.Client(base_url=live_url, timeout=20) as client:
            start.wait()
            response = client.post(RELEASE, content=body)
            assert response.status_code == 200, response.text
            answers.append(response.content)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == 8 and len(set(answers)) == 1
    assert KeyperRelease.objects.count() == 1


def _start_up(**settings: str) -> subprocess.CompletedProcess:
    env = cairn_env("sqlite:///:memory:", **settings)
    return subprocess.run(
        [sys.executable, "-c", "import cairn.settings"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_start_up_refuses_a_keyper_without_a_witness_key_and_a_keyper_that_is_no_witness():
    keyper_key = _pem(X25519PrivateKey.generate())
    alone = _start_up(CAIRN_KEYPER_KEY=keyper_key)
    assert alone.returncode != 0
    assert "CAIRN_KEYPER_KEY needs CAIRN_WITNESS_SIGNING_KEY" in alone.stderr

    witness_key = Ed25519PrivateKey.generate()
    witness = private_verifier_key("w.example/cairn/witness", witness_key, type=COSIGNATURE_V1)
    hpke = keyper_public(X25519PrivateKey.generate())
    keypers = f"w.example/cairn/witness {hpke} https://w.example/api/keyper"
    stranger = f"{keypers}\nk.example/cairn/witness {hpke} https://k.example/api/keyper"
    witnesses = f"{witness.text} https://w.example/api/witness"
    refused = _start_up(CAIRN_WITNESSES=witnesses, CAIRN_KEYPERS=stranger)
    assert refused.returncode != 0
    assert "CAIRN_KEYPERS names k.example/cairn/witness, not among CAIRN_WITNESSES" in (
        refused.stderr
    )
    fine = _start_up(
        CAIRN_WITNESSES=witnesses,
        CAIRN_KEYPERS=keypers,
        CAIRN_KEYPER_KEY=keyper_key,
        CAIRN_WITNESS_SIGNING_KEY=_pem(witness_key),
    )
    assert fine.returncode == 0, fine.stderr
