"""SPEC §15.8 "The verifier": the served verifier opens every keyper-sealed item of an evaluation
again from its signed releases, and holds every void to the rules; it passes an honest mix of
plain, opened and void items and fails, naming what, each way a keeper could publish a sealed
item it did not honestly open or void."""

from __future__ import annotations

from datetime import timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from core.canonical import canonical_digest
from tests.factories import OTHER_SOURCE, SOURCE, contribution_report
from tests.ledger.sealed_evaluations import SealedEvaluation, keypers_made, sequenced_and_witnessed

PRIVATE = "Reproduced it against http://10.0.3.17:8000/api on the build box."


@pytest.fixture
def keypers(witnessed, settings):
    """Three witnesses, quorum 2, each a keyper too (threshold 2), none of them answering a
    release (a keyper that is down): as the site configures them."""
    made = keypers_made(witnessed())
    settings.CAIRN_KEYPERS = made.configured()
    settings.CAIRN_KEYPER_THRESHOLD = 2
    return made


@pytest.fixture
def building(keypers, poster, post_task, http):
    def build() -> SealedEvaluation:
        task = post_task(poster)
        sequenced_and_witnessed()  # a client seals only to a task whose entry is witnessed
        return SealedEvaluation(keypers, task, http)

    return build


@pytest.fixture
def check(verify, keypers, tmp_path):
    """`cairn_verify.py --witnesses <pins> task <saved task>`: the keypers pinned from a file."""
    pins = keypers.pins(tmp_path / "pins.txt")

    def run(evaluation_file):
        return verify("--witnesses", str(pins), "task", str(evaluation_file))

    return run


def test_an_honest_mix_of_plain_opened_and_void_items_verifies(
    building, check, make_agent, contribute, tmp_path
):
    built = building()
    plain_report = contribution_report()
    built.plain(contribute(make_agent(), built.task)["receipt"], plain_report)
    built.sealed(contribution_report(summary="Sealed: the header is set on every call, always."))
    built.sealed(contribution_report(), released=(1, 2))
    built.sealed(contribution_report(summary=PRIVATE), void="private_content")
    built.sealed(
        contribution_report(source_urls=["https://example.org/x"]), void="source_not_in_task"
    )
    built.sealed(contribution_report(), released=(0,), void="keys_unavailable", shares=True)

    checked = check(built.published(tmp_path / "task.json"))

    assert checked.returncode == 0, checked.stdout + checked.stderr
    out = checked.stdout
    assert "every report matches its digest (3 reports, 3 void)" in out
    assert out.count("opens with 2 signed releases to the published report") == 2
    assert "void as source_not_in_task: the opened report breaks that rule" in out
    assert "is void as private_content: without its plaintext this cannot be checked" in out
    assert "void as keys_unavailable: 1 of the 2 releases needed were made by" in out
    assert "(the default) is assumed" in out  # the card does not publish the grace
    assert "FAIL" not in out


def test_a_published_report_other_than_the_one_its_releases_open_is_caught(
    building, check, tmp_path
):
    built = building()
    item = built.sealed(contribution_report())
    built.sealed(contribution_report())
    swapped = contribution_report(verdict="source_contradicted")
    item["report"] = swapped
    item["report_digest"] = canonical_digest(swapped)

    checked = check(built.published(tmp_path / "task.json"))

    assert checked.returncode == 1
    assert "the published report or salt is not the one its releases open" in checked.stdout


def test_a_release_not_signed_by_its_keyper_is_caught(building, check, tmp_path):
    built = building()
    item = built.sealed(contribution_report())
    payload = built.kept[item["contribution_id"]]["payload"]
    at = item["sealed"]["releases"][1]["released_at"]
    item["sealed"]["releases"][1] = built.release(
        payload, 1, item["contribution_id"], at, signer=Ed25519PrivateKey.generate()
    )

    checked = check(built.published(tmp_path / "task.json"))

    assert checked.returncode == 1
    assert "is not signed by its pinned witness key" in checked.stdout


def test_a_release_made_before_the_deadline_and_its_merge_delay_is_caught(
    building, check, tmp_path
):
    built = building()
    built.sealed(contribution_report(), released_after=timedelta(seconds=30))

    checked = check(built.published(tmp_path / "task.json"))

    assert checked.returncode == 1
    assert "before the deadline + 60 s" in checked.stdout


def test_a_void_the_opened_report_does_not_deserve_is_wrongful(building, check, tmp_path):
    built = building()
    built.sealed(contribution_report(source_urls=[SOURCE, OTHER_SOURCE]), void="source_not_in_task")
    built.sealed(contribution_report(), void="invalid_payload")

    checked = check(built.published(tmp_path / "task.json"))

    assert checked.returncode == 1
    assert checked.stdout.count("WRONGFUL VOID") == 2
    assert "void as source_not_in_task, and the opened report breaks no rule" in checked.stdout


def test_keys_unavailable_with_k_releases_made_within_the_grace_is_wrongful(
    building, check, tmp_path
):
    built = building()
    built.sealed(contribution_report(), released=(0, 2), void="keys_unavailable")

    checked = check(built.published(tmp_path / "task.json"))

    assert checked.returncode == 1
    assert "WRONGFUL VOID: void as keys_unavailable, yet 2 keypers released" in checked.stdout


def test_keys_unavailable_without_the_sealed_shares_cannot_be_checked(building, check, tmp_path):
    built = building()
    built.sealed(contribution_report(), released=(), void="keys_unavailable")

    checked = check(built.published(tmp_path / "task.json"))

    assert checked.returncode == 1
    assert "publishes no sealed shares to ask the keypers for" in checked.stdout


def test_shares_that_agree_cannot_be_inconsistent(building, check, tmp_path):
    built = building()
    built.sealed(contribution_report(), released=(0, 1, 2), void="inconsistent_shares")

    checked = check(built.published(tmp_path / "task.json"))

    assert checked.returncode == 1
    assert "void as inconsistent_shares, but its signed releases agree" in checked.stdout


def test_shares_that_disagree_are_inconsistent(building, check, tmp_path):
    built = building()
    item = built.sealed(contribution_report(), released=(0, 1), void="inconsistent_shares")
    payload = built.kept[item["contribution_id"]]["payload"]
    at = item["sealed"]["releases"][0]["released_at"]
    changed = bytes(b ^ 1 for b in built.share(payload, 2))
    item["sealed"]["releases"].append(
        built.release(payload, 2, item["contribution_id"], at, share=changed)
    )

    checked = check(built.published(tmp_path / "task.json"))

    assert checked.returncode == 0, checked.stdout
    assert "void as inconsistent_shares: its signed releases disagree" in checked.stdout


def test_a_void_item_counted_in_the_verdict_is_caught(building, check, tmp_path):
    built = building()
    built.sealed(contribution_report())
    built.sealed(
        contribution_report(source_urls=["https://example.org/x"]), void="source_not_in_task"
    )
    built.items[1]["report"] = contribution_report()  # what a keeper counting it would keep

    checked = check(built.published(tmp_path / "task.json", counted_void=True))

    assert checked.returncode == 1
    assert "cairn.rules/0.1 gives ('unresolved', None)" in checked.stdout


def test_a_private_void_that_publishes_its_ciphertext_is_caught(building, check, tmp_path):
    built = building()
    item = built.sealed(contribution_report(summary=PRIVATE), void="private_content")
    payload = built.kept[item["contribution_id"]]["payload"]
    item["sealed"]["ciphertext"] = payload["ciphertext"]

    checked = check(built.published(tmp_path / "task.json"))

    assert checked.returncode == 1
    assert "void as private_content, it still publishes what opens it" in checked.stdout
