"""SPEC §15.8: `cairn_verify.py dispute <receipt> <report.json>` proves a wrongful void from the
contributor's side, with nothing but what it kept: the signed receipt, and the report and salt its
commitment seals. Exit 3 is proof (printed with the evidence); 0 says the evaluation treats the
contribution rightly (counted with this report, or void by a rule the report breaks); 1 is a
check that does not hold."""

from __future__ import annotations

import json

import pytest

from tests.factories import contribution_report
from tests.ledger.sealed_evaluations import SealedEvaluation, keypers_made, sequenced_and_witnessed

PROOF = 3
PRIVATE = "Reproduced it against http://10.0.3.17:8000/api on the build box."


@pytest.fixture
def keypers(witnessed, settings):
    made = keypers_made(witnessed())
    settings.CAIRN_KEYPERS = made.configured()
    settings.CAIRN_KEYPER_THRESHOLD = 2
    return made


@pytest.fixture
def built(keypers, poster, post_task, http):
    task = post_task(poster)
    sequenced_and_witnessed()
    return SealedEvaluation(keypers, task, http)


@pytest.fixture
def dispute(verify, keypers, tmp_path):
    pins = keypers.pins(tmp_path / "pins.txt")

    def run(receipt_file, report_file):
        return verify("--witnesses", str(pins), "dispute", str(receipt_file), str(report_file))

    return run


def test_a_counted_contribution_has_nothing_to_dispute(built, dispute, tmp_path):
    item = built.sealed(contribution_report())
    built.sealed(contribution_report())
    built.published(tmp_path / "task.json")

    checked = dispute(*built.contributor_files(item, tmp_path))

    assert checked.returncode == 0, checked.stdout
    assert (
        "the evaluation counts it with this report: there is nothing to dispute" in checked.stdout
    )


def test_a_report_void_for_a_rule_it_does_not_break_is_proven_wrongful(built, dispute, tmp_path):
    item = built.sealed(contribution_report(), void="source_not_in_task")
    built.published(tmp_path / "task.json")
    receipt_file, report_file = built.contributor_files(item, tmp_path)

    checked = dispute(receipt_file, report_file)

    assert checked.returncode == PROOF, checked.stdout
    assert "PROOF OF A WRONGFUL VOID: void as source_not_in_task, yet the report" in checked.stdout
    assert json.dumps(json.loads(receipt_file.read_text()), separators=(",", ":")) in checked.stdout
    kept = json.loads(report_file.read_text())
    evidence = {"report": kept["report"], "salt": kept["salt"]}
    assert json.dumps(evidence, separators=(",", ":")) in checked.stdout


def test_a_clean_report_void_as_private_is_proven_wrongful_and_a_private_one_is_not(
    built, dispute, tmp_path
):
    clean = built.sealed(contribution_report(), void="private_content")
    private = built.sealed(contribution_report(summary=PRIVATE), void="private_content")
    built.published(tmp_path / "task.json")

    wrongful = dispute(*built.contributor_files(clean, tmp_path))
    right = dispute(*built.contributor_files(private, tmp_path))

    assert wrongful.returncode == PROOF, wrongful.stdout
    assert "PROOF OF A WRONGFUL VOID: void as private_content" in wrongful.stdout
    assert right.returncode == 0, right.stdout
    assert (
        "the void is right: the report breaks private_content (summary looks like" in right.stdout
    )


def test_keys_unavailable_is_proven_wrongful_by_releases_the_contributor_kept(
    built, dispute, tmp_path
):
    item = built.sealed(contribution_report(), released=(0,), void="keys_unavailable")
    built.published(tmp_path / "task.json")
    receipt_file, report_file = built.contributor_files(item, tmp_path)
    kept = json.loads(report_file.read_text())
    payload = built.kept[item["contribution_id"]]["payload"]
    at = item["sealed"]["releases"][0]["released_at"]
    kept["releases"] = [built.release(payload, 2, item["contribution_id"], at)]
    report_file.write_text(json.dumps(kept))

    checked = dispute(receipt_file, report_file)

    assert checked.returncode == PROOF, checked.stdout
    assert "void as keys_unavailable, yet 2 keypers released their shares by" in checked.stdout


def test_keys_unavailable_while_the_keypers_are_down_is_right(built, dispute, tmp_path):
    item = built.sealed(contribution_report(), released=(1,), void="keys_unavailable")
    built.published(tmp_path / "task.json")

    checked = dispute(*built.contributor_files(item, tmp_path))

    assert checked.returncode == 0, checked.stdout
    assert "the void is right: 1 of the 2 releases needed were made by" in checked.stdout


def test_a_report_other_than_the_one_sealed_proves_nothing(built, dispute, tmp_path):
    item = built.sealed(contribution_report(), void="source_not_in_task")
    built.published(tmp_path / "task.json")
    receipt_file, report_file = built.contributor_files(item, tmp_path)
    kept = json.loads(report_file.read_text())
    kept["report"]["verdict"] = "source_contradicted"
    report_file.write_text(json.dumps(kept))

    checked = dispute(receipt_file, report_file)

    assert checked.returncode == 1, checked.stdout
    assert "this report and salt are not the ones sealed under its commitment" in checked.stdout


def test_a_contribution_left_out_of_the_evaluation_is_proven_omitted(built, dispute, tmp_path):
    left_out = built.sealed(contribution_report())
    built.items.remove(left_out)
    built.sealed(contribution_report())
    built.published(tmp_path / "task.json")

    checked = dispute(*built.contributor_files(left_out, tmp_path))

    assert checked.returncode == PROOF, checked.stdout
    assert "PROOF OF OMISSION: the evaluation leaves this contribution out" in checked.stdout
