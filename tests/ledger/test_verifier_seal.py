"""SPEC §15.8 "Sealing is a client's job": `cairn_verify.py seal <task> <report.json>` prints the
sealed data part for any client, sealed to the keypers it pinned with the witnesses, for the task
entry and deadline it proved under a witnessed checkpoint; it refuses a report the site would
void, a closed task, and a site whose card lists no keypers; and a card naming other keypers
than those pinned fails."""

from __future__ import annotations

import json
import stat

import pytest

from ledger.keyper_seal import b64u_decode, key_combine, report_open
from ledger.notes import log_origin
from tests.factories import contribution_report
from tests.ledger.sealed_evaluations import (
    SealedEvaluation,
    keypers_made,
    sequenced_and_witnessed,
)


@pytest.fixture
def keypers(witnessed, settings):
    made = keypers_made(witnessed())
    settings.CAIRN_KEYPERS = made.configured()
    settings.CAIRN_KEYPER_THRESHOLD = 2
    return made


@pytest.fixture
def task(poster, post_task):
    posted = post_task(poster)
    sequenced_and_witnessed()
    return posted


def test_the_sealed_payload_opens_with_the_keypers_shares_for_the_task_and_its_deadline(
    verify, keypers, task, http, tmp_path
):
    report = contribution_report()
    (tmp_path / "report.json").write_text(json.dumps(report))
    kept = tmp_path / "kept.json"

    sealed = verify("seal", str(task.id), str(tmp_path / "report.json"), "--keep", str(kept))

    assert sealed.returncode == 0, sealed.stdout + sealed.stderr
    payload = json.loads(sealed.stdout)  # stdout is the payload alone; the checks are on stderr
    assert "ok    the task's entry and deadline are under it" in sealed.stderr
    built = SealedEvaluation(keypers, task, http)
    assert payload["task_entry"] == built.task_entry_index
    assert [share["keyper"] for share in payload["shares"]] == [k.name for k in keypers.listed]
    key = key_combine([(n + 1, built.share(payload, n)) for n in (2, 0)], 2)
    opened, salt = report_open(
        b64u_decode(payload["ciphertext"]),
        key,
        site=log_origin(),
        task_id=str(task.id),
        deadline=task.deadline_text,
        commitment=payload["commitment"],
    )
    assert opened == report
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert json.loads(kept.read_text())["salt"] == salt
    assert json.loads(kept.read_text())["commitment"] == payload["commitment"]
    assert payload["approval"] == {
        "public_output": True,
        "scope": "this_contribution",
        "commitment": payload["commitment"],
    }


def test_the_salt_is_kept_in_cairn_home_by_default(verify, keypers, task, tmp_path):
    (tmp_path / "report.json").write_text(json.dumps(contribution_report()))

    sealed = verify("seal", str(task.id), str(tmp_path / "report.json"))

    payload = json.loads(sealed.stdout)
    kept = tmp_path / "home" / "sealed" / f"{payload['commitment'].split(':')[1]}.json"
    assert json.loads(kept.read_text())["report"] == contribution_report()
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600


def test_a_report_the_site_would_void_is_not_sealed(verify, keypers, task, tmp_path):
    refused = {}
    for name, report in {
        "source": contribution_report(source_urls=["https://example.org/elsewhere"]),
        "private": contribution_report(summary="Reproduced on http://10.0.3.17:8000/api today."),
        "shape": contribution_report(summary="short"),
        "approval": {**contribution_report(), "approval": {}},
    }.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(report))
        refused[name] = verify("seal", str(task.id), str(tmp_path / f"{name}.json"))

    assert all(run.returncode == 1 and run.stdout == "" for run in refused.values())
    assert (
        "would void this report at the deadline as source_not_in_task" in refused["source"].stderr
    )
    assert "as private_content: summary looks like a private URL" in refused["private"].stderr
    assert "10.0.3.17" not in refused["private"].stderr
    assert "as invalid_payload" in refused["shape"].stderr
    assert "must hold the report without its approval" in refused["approval"].stderr


def test_a_site_listing_no_keypers_takes_only_the_plain_form(verify, task, tmp_path):
    (tmp_path / "report.json").write_text(json.dumps(contribution_report()))

    refused = verify("seal", str(task.id), str(tmp_path / "report.json"))

    assert refused.returncode == 1 and refused.stdout == ""
    assert "the site's card lists no keypers: it takes only the plain form" in refused.stderr


def test_a_card_naming_other_keypers_than_pinned_fails(verify, keypers, task, settings, tmp_path):
    (tmp_path / "report.json").write_text(json.dumps(contribution_report()))
    assert verify("log").returncode == 0  # pins the card's witnesses and keypers
    settings.CAIRN_KEYPERS = keypers_made(keypers.witnesses).configured()  # other HPKE keys

    checked = verify("log")
    sealed = verify("seal", str(task.id), str(tmp_path / "report.json"))

    assert checked.returncode == 1
    assert "the site's card names other keypers or another threshold than pinned" in checked.stdout
    assert sealed.returncode == 1 and sealed.stdout == ""


def test_a_witnesses_file_pins_the_keypers_and_the_card_must_name_the_same(
    verify, keypers, task, tmp_path
):
    (tmp_path / "report.json").write_text(json.dumps(contribution_report()))
    other = keypers_made(keypers.witnesses)
    honest = keypers.pins(tmp_path / "honest.txt")
    foreign = other.pins(tmp_path / "foreign.txt")

    pinned = verify("--witnesses", str(honest), "seal", str(task.id), str(tmp_path / "report.json"))
    refused = verify("--witnesses", str(foreign), "log")

    assert pinned.returncode == 0, pinned.stderr
    assert [s["keyper"] for s in json.loads(pinned.stdout)["shares"]] == [
        k.name for k in keypers.listed
    ]
    assert refused.returncode == 1
    assert "names other keypers or another threshold than pinned" in refused.stdout
