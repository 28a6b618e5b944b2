"""SPEC §15.8's evaluation: reports sealed to keypers are opened from the keypers' releases by the
worker's sweep, once, and those that cannot be opened or break a rule are void, published with
their code and counted in no verdict. The keypers here are keys the test holds: it makes their
releases itself, as a keyper would (its share opened with the `info` it rebuilt, signed)."""

from __future__ import annotations

import json
import secrets
from datetime import timedelta
from typing import Any

import pytest
from Crypto.Protocol.SecretSharing import Shamir
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from core.canonical import canonical_digest, canonical_json
from ledger.entry_types import EVALUATION
from ledger.keyper_seal import (
    SUITE,
    ShareContext,
    b64u,
    b64u_decode,
    ciphertext_digest,
    commitment_of,
    release_claims,
    release_sign,
    report_aad,
)
from ledger.models import Leaf, QueuedEntry
from ledger.notes import log_origin
from tasks.evaluation import task_evaluate, task_evaluate_with_releases, tasks_evaluate_due
from tasks.jobs import evaluate_due
from tasks.models import Contribution, Task, TaskStatus
from tasks.rendered import stored_view
from tasks.view_models import TaskView
from tests.factories import (
    OTHER_SOURCE,
    contribution_payload,
    contribution_report,
    deadline_in,
    open_task_payload,
    open_task_request,
)
from tests.http.conftest import wait_past
from tests.ledger.sealed_to_keypers import (
    HeldKeyper,
    keypers_held,
    release,
    releases_keep,
    sealed_contribute,
    sealed_payload,
    task_entry_index,
)

GRACE = timedelta(seconds=600)
RELEASED = timedelta(seconds=60)
OUTSIDE_SOURCE = "https://developer.mozilla.org/en-US/docs/Web/HTTP/Headers"


@pytest.fixture
def keypers(settings) -> list[HeldKeyper]:
    """Three keypers, two of them enough, as the site lists them."""
    held = keypers_held(3)
    settings.CAIRN_KEYPERS = [
        {"name": k.listed.name, "hpke_key": k.listed.hpke_key, "url": k.listed.url} for k in held
    ]
    settings.CAIRN_KEYPER_THRESHOLD = 2
    settings.CAIRN_KEYPER_GRACE_S = int(GRACE.total_seconds())
    return held


@pytest.fixture
def seal_to(poster, post_task, make_agent, keypers):
    """Send a report sealed to the keypers, from a fresh agent, to `task`."""

    def send(task: Task, report: dict[str, Any] | None = None) -> Contribution:
        payload = sealed_payload(task, report or contribution_report(), keypers)
        return sealed_contribute(make_agent().agent, task, payload)

    return send


def _evaluation_entries(task: Task) -> list[dict[str, Any]]:
    """The task's evaluation entries, in the log or still queued for it."""
    texts = [*Leaf.objects.values_list("entry", flat=True)]
    texts += QueuedEntry.objects.values_list("entry", flat=True)
    entries = [json.loads(text) for text in texts]
    return [e for e in entries if e["type"] == EVALUATION and e["task_id"] == str(task.pk)]


def _item(task: Task, contribution: Contribution) -> dict[str, Any]:
    task.refresh_from_db()
    (item,) = [
        i for i in task.evaluation["contributions"] if i["contribution_id"] == str(contribution.id)
    ]
    return item


def _item_all(task: Task) -> list[dict[str, Any]]:
    task.refresh_from_db()
    return task.evaluation["contributions"]


def _released_at(task: Task):
    return task.deadline + RELEASED


# --- opening ---------------------------------------------------------------------------------


def test_two_of_three_releases_open_every_report_and_the_sweep_counts_them(
    poster, post_task, seal_to, keypers, time_machine
):
    # Given a task with two reports sealed to the keypers
    task = post_task(poster)
    reports = [contribution_report(), contribution_report(limitations=[])]
    sealed = [seal_to(task, report) for report in reports]
    # When the second keyper is down, and the other two released once the time came
    time_machine.move_to(_released_at(task) + timedelta(seconds=1), tick=False)
    for contribution in sealed:
        releases_keep(contribution, [keypers[0], keypers[2]], released_at=_released_at(task))

    evaluated = evaluate_due()

    # Then the sweep opened both and counted them
    task.refresh_from_db()
    assert evaluated == 1
    assert task.status == TaskStatus.COMPLETED and not task.keys_pending
    assert task.evaluation["outcome"] == "resolved"
    assert task.evaluation["verdict"] == "source_supported"
    assert task.evaluation["counts"] == {
        "source_supported": 2,
        "source_contradicted": 0,
        "source_unclear": 0,
    }
    items = task.evaluation["contributions"]
    assert [i["contribution_id"] for i in items] == [str(c.id) for c in sealed]
    for item, contribution, report in zip(items, sealed, reports, strict=True):
        envelope = contribution.keyper_seal
        assert set(item) == {
            "contribution_id",
            "received_at",
            "commitment",
            "sealed",
            "report_digest",
            "salt",
            "report",
        }
        # Anyone can redo it: the envelope and both releases are published with the report
        assert item["commitment"] == envelope["commitment"]
        assert item["sealed"]["ciphertext"] == envelope["ciphertext"]
        assert item["sealed"]["ciphertext_digest"] == ciphertext_digest(
            b64u_decode(envelope["ciphertext"])
        )
        assert item["sealed"]["threshold"] == 2
        # and its sealed shares, so anyone can ask a keyper the site did not
        assert item["sealed"]["shares"] == envelope["shares"]
        assert [r["keyper"] for r in item["sealed"]["releases"]] == [
            keypers[0].name,
            keypers[2].name,
        ]
        assert item["sealed"]["releases"] == sorted(contribution.releases, key=lambda r: r["index"])
        assert item["report"] == report
        assert item["report_digest"] == canonical_digest(report)
        assert commitment_of(item["report_digest"], item["salt"]) == item["commitment"]
    # The public view holds it and keeps to its published schema; one evaluation entry is logged
    view = stored_view(task)
    assert view["evaluation"] == task.evaluation
    TaskView.model_validate(view)
    assert len(_evaluation_entries(task)) == 1


def test_a_task_of_plain_and_keyper_sealed_reports_evaluates_them_together(
    poster, post_task, make_agent, contribute, seal_to, keypers, time_machine
):
    task = post_task(poster)
    first = seal_to(task)
    contribute(
        make_agent(),
        task,
        contribution_payload(contribution_report(verdict="source_contradicted")),
    )
    last = seal_to(task)
    time_machine.move_to(_released_at(task) + timedelta(seconds=1), tick=False)
    for contribution in (first, last):
        releases_keep(contribution, keypers[:2], released_at=_released_at(task))

    assert evaluate_due() == 1

    task.refresh_from_db()
    plain = Contribution.objects.get(task=task, keyper_seal__isnull=True)
    items = task.evaluation["contributions"]
    assert [i["contribution_id"] for i in items] == [str(c.id) for c in (first, plain, last)]
    assert set(items[1]) == {"contribution_id", "received_at", "report_digest", "salt", "report"}
    assert items[1]["report_digest"] == plain.report_digest
    assert "sealed" in items[0] and "sealed" in items[2]
    assert task.evaluation["outcome"] == "contested"
    assert task.evaluation["counts"]["source_supported"] == 2
    assert task.evaluation["counts"]["source_contradicted"] == 1
    TaskView.model_validate(stored_view(task))


# --- when -------------------------------------------------------------------------------------


def test_no_read_evaluates_a_task_whose_keys_are_pending(
    poster, post_task, seal_to, keypers, time_machine
):
    # Given a task with a sealed report, its releases kept, and a plain task, both past deadline
    task = post_task(poster)
    releases_keep(seal_to(task), keypers, released_at=_released_at(task))
    plain = post_task(poster)
    time_machine.move_to(_released_at(task) + timedelta(minutes=5), tick=False)

    # When every read's evaluation runs
    assert tasks_evaluate_due() == 1
    assert task_evaluate(task_id=task.pk) is False

    # Then only the plain task was evaluated: the other waits for the worker
    task.refresh_from_db()
    plain.refresh_from_db()
    assert plain.status != TaskStatus.WORKING
    assert task.status == TaskStatus.WORKING and task.keys_pending
    assert task.evaluation is None and not _evaluation_entries(task)
    assert evaluate_due() == 1


def test_past_the_deadline_every_door_shows_a_task_whose_keys_are_pending_open(
    http, poster, post_task, seal_to, keypers, short_deadlines
):
    # Given a task with a sealed report and a plain task, both past their deadline
    deadline = deadline_in(3)
    task, plain = (
        post_task(poster, open_task_payload(open_task_request(deadline=deadline))) for _ in range(2)
    )
    releases_keep(seal_to(task), keypers, released_at=task.deadline)
    wait_past(deadline)
    a2a = {"A2A-Version": "1.0"}

    def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
        envelope = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return http.post("/api/a2a", json=envelope, headers=a2a).json()["result"]

    # When each door reads them, lists first (their reads evaluate what is due)
    listed = {view["id"]: view["state"] for view in http.get("/api/a2a-tasks").json()["tasks"]}
    a2a_listed = {t["id"]: t["status"]["state"] for t in rpc("ListTasks", {})["tasks"]}
    got = rpc("GetTask", {"id": str(task.pk)})
    rest = http.get(f"/api/a2a/tasks/{task.pk}", headers=a2a).json()
    view = http.get(f"/api/a2a-tasks/{task.pk}").json()
    page = http.get(f"/a2a/tasks/{task.pk}").text

    # Then the plain task is evaluated and the other is open, waiting for the worker
    assert listed == {str(plain.pk): "evaluated", str(task.pk): "open"}
    assert a2a_listed[str(task.pk)] == "TASK_STATE_WORKING"
    assert a2a_listed[str(plain.pk)] == "TASK_STATE_FAILED"
    assert got["status"]["state"] == rest["status"]["state"] == "TASK_STATE_WORKING"
    assert view["state"] == "open" and view["evaluation"] is None
    assert "badge-open" in page and "awaiting-keys" in page
    task.refresh_from_db()
    assert task.status == TaskStatus.WORKING and task.keys_pending
    assert not _evaluation_entries(task)


def test_the_sweep_waits_for_k_releases_of_every_report_then_evaluates_once(
    poster, post_task, seal_to, keypers, time_machine
):
    task = post_task(poster)
    first, second = seal_to(task), seal_to(task)
    at = _released_at(task)

    # Before the keypers release, the sweep leaves the task alone, whatever is kept
    time_machine.move_to(task.deadline + timedelta(seconds=30), tick=False)
    releases_keep(first, keypers[:1], released_at=at)
    assert evaluate_due() == 0

    # One release each is not enough
    time_machine.move_to(at + timedelta(seconds=5), tick=False)
    releases_keep(second, keypers[1:2], released_at=at)
    assert evaluate_due() == 0
    # Nor k for one report but not the other
    releases_keep(first, keypers[2:], released_at=at)
    assert evaluate_due() == 0
    task.refresh_from_db()
    assert task.status == TaskStatus.WORKING and task.keys_pending

    # The k-th release of the last report: the next sweep evaluates
    time_machine.move_to(at + timedelta(seconds=65), tick=False)
    releases_keep(second, keypers[:1], released_at=at + timedelta(seconds=64))
    assert evaluate_due() == 1
    task.refresh_from_db()
    evaluated_at = task.evaluated_at
    assert task.evaluation["outcome"] == "resolved"
    assert evaluated_at - (at + timedelta(seconds=64)) < timedelta(minutes=1)

    # And never again
    time_machine.move_to(at + timedelta(minutes=30), tick=False)
    assert evaluate_due() == 0
    assert task_evaluate(task_id=task.pk) is False
    task.refresh_from_db()
    assert task.evaluated_at == evaluated_at
    assert len(_evaluation_entries(task)) == 1


def test_releases_a_sweep_collected_are_kept_once_each_under_the_tasks_lock(
    poster, post_task, seal_to, keypers, time_machine
):
    # Given two reports, one with its first keyper's release kept by an earlier sweep
    task = post_task(poster)
    first, second = seal_to(task), seal_to(task)
    at = _released_at(task)
    releases_keep(first, keypers[:1], released_at=at)
    time_machine.move_to(at + timedelta(seconds=1), tick=False)
    made = {c.id: [release(k, c, released_at=at) for k in keypers] for c in (first, second)}

    # When a sweep brings the first keyper's again and the second's, and one release of the other
    assert not task_evaluate_with_releases(
        task_id=task.pk, collected={first.id: made[first.id], second.id: made[second.id][2:]}
    )

    # Then each is kept once, and the task waits for the other's second release
    first.refresh_from_db()
    second.refresh_from_db()
    assert [r["keyper"] for r in first.releases] == [k.name for k in keypers]
    assert second.releases == made[second.id][2:]
    assert task_evaluate_with_releases(task_id=task.pk, collected={second.id: made[second.id]})
    assert [len(i["sealed"]["releases"]) for i in _item_all(task)] == [3, 3]
    assert not task_evaluate_with_releases(task_id=task.pk, collected={})


def test_a_report_without_k_releases_at_the_end_of_the_grace_is_keys_unavailable(
    poster, post_task, seal_to, keypers, time_machine
):
    task = post_task(poster)
    opened, starved = seal_to(task), seal_to(task)
    at = _released_at(task)
    releases_keep(opened, keypers[:2], released_at=at)
    releases_keep(starved, keypers[:1], released_at=at)

    # Within the grace the task waits for the missing release
    time_machine.move_to(at + GRACE - timedelta(seconds=1), tick=False)
    assert evaluate_due() == 0

    # At its end the report is void: published with what came in, counted in no verdict
    time_machine.move_to(at + GRACE, tick=False)
    assert evaluate_due() == 1
    item = _item(task, starved)
    assert item["void"]["code"] == "keys_unavailable"
    assert "1 of the 2" in item["void"]["message"]
    assert item["sealed"]["ciphertext"] == starved.keyper_seal["ciphertext"]
    assert [r["keyper"] for r in item["sealed"]["releases"]] == [keypers[0].name]
    assert not {"report", "report_digest", "salt"} & set(item)
    assert task.evaluation["counts"]["source_supported"] == 1
    assert task.evaluation["outcome"] == "unresolved"  # one report counted, two needed
    TaskView.model_validate(stored_view(task))


def _lying(keyper: HeldKeyper, contribution: Contribution, *, released_at) -> dict[str, Any]:
    """A keyper's release of a share that is not the one sealed to it, signed all the same."""
    honest = release(keyper, contribution, released_at=released_at)
    share = bytes(b ^ 0x5A for b in b64u_decode(honest["share"]))
    claims = release_claims(
        keyper=keyper.name,
        site=log_origin(),
        task_id=str(contribution.task_id),
        contribution_id=str(contribution.id),
        index=honest["index"],
        share=b64u(share),
        released_at=honest["released_at"],
    )
    return {**honest, "share": claims["share"], "signature": release_sign(claims, keyper.signing)}


def _honest_then_lying(
    contribution: Contribution, keypers: list[HeldKeyper], *, released_at
) -> None:
    """The first keyper's release kept, then the second's, of a share not the one sealed to it."""
    releases_keep(contribution, keypers[:1], released_at=released_at)
    bad = _lying(keypers[1], contribution, released_at=released_at)
    Contribution.objects.filter(pk=contribution.pk).update(
        releases=[*Contribution.objects.get(pk=contribution.pk).releases, bad]
    )


def test_released_shares_that_disagree_make_the_report_inconsistent_shares(
    poster, post_task, seal_to, keypers, time_machine
):
    task = post_task(poster)
    contribution = seal_to(task)
    at = _released_at(task)
    time_machine.move_to(at + timedelta(seconds=1), tick=False)

    # Two releases, one of them wrong: the key they give does not open the report, and with two
    # shares nothing tells a wrong share from a wrong ciphertext, so the sweep waits for a third
    _honest_then_lying(contribution, keypers, released_at=at)
    assert evaluate_due() == 0

    # The third shows the disagreement: void at once, with every release published
    releases_keep(contribution, keypers[2:], released_at=at)
    assert evaluate_due() == 1
    item = _item(task, contribution)
    assert item["void"]["code"] == "inconsistent_shares"
    assert len(item["sealed"]["releases"]) == 3
    assert "report" not in item
    assert task.evaluation["counts"]["source_supported"] == 0


def test_a_kept_share_the_keeper_spoiled_voids_the_report_rather_than_stopping_the_sweep(
    poster, post_task, seal_to, keypers, time_machine
):
    """A share is checked when it is collected; one the keeper's database changes afterwards into
    no base64url at all still gives a void, and the sweep still evaluates the task."""
    task = post_task(poster)
    contribution = seal_to(task)
    at = _released_at(task)
    time_machine.move_to(at + timedelta(seconds=1), tick=False)
    releases_keep(contribution, keypers[:2], released_at=at)
    spoiled = [{**contribution.releases[0], "share": "not a share!"}, contribution.releases[1]]
    Contribution.objects.filter(pk=contribution.pk).update(releases=spoiled)

    assert evaluate_due() == 1
    item = _item(task, contribution)
    assert item["void"]["code"] == "inconsistent_shares"
    assert "report" not in item


def test_disagreeing_shares_that_still_open_private_text_publish_none_of_it(
    poster, post_task, seal_to, keypers, time_machine
):
    # Given a report holding an address, whose releases disagree but of which two honest ones
    # would open it: the void must not publish what opens it
    task = post_task(poster)
    contribution = seal_to(
        task, contribution_report(summary="Ask the maintainer at maint@example.org, who agreed.")
    )
    at = _released_at(task)
    time_machine.move_to(at + timedelta(seconds=1), tick=False)
    _honest_then_lying(contribution, keypers, released_at=at)
    releases_keep(contribution, keypers[2:], released_at=at)

    assert evaluate_due() == 1

    item = _item(task, contribution)
    assert item["void"]["code"] == "private_content"
    assert set(item["sealed"]) == {"ciphertext_digest", "threshold"}
    public = task.view_json
    assert "maint@example.org" not in public
    assert contribution.keyper_seal["ciphertext"] not in public
    for kept in Contribution.objects.get(pk=contribution.pk).releases:
        assert kept["share"] not in public


def _overdue(client) -> float:
    (line,) = [
        line
        for line in client.get("/metrics").text.splitlines()
        if line.startswith("cairn_tasks_overdue ")
    ]
    return float(line.split()[1])


def test_a_task_awaiting_its_keys_is_overdue_only_once_the_grace_is_over(
    client, poster, post_task, seal_to, keypers, time_machine
):
    task = post_task(poster)
    seal_to(task)
    time_machine.move_to(_released_at(task) + timedelta(seconds=1), tick=False)
    assert _overdue(client) == 0  # open by design: the keypers may still release

    time_machine.move_to(_released_at(task) + GRACE + timedelta(seconds=1), tick=False)
    assert _overdue(client) == 1
    evaluate_due()
    assert _overdue(client) == 0


# --- the deferred rules -----------------------------------------------------------------------


def test_a_report_citing_a_source_outside_the_task_is_void_source_not_in_task(
    poster, post_task, seal_to, keypers, time_machine
):
    task = post_task(poster)
    contribution = seal_to(task, contribution_report(source_urls=[OUTSIDE_SOURCE]))
    counted = seal_to(task, contribution_report(source_urls=[OTHER_SOURCE]))
    time_machine.move_to(_released_at(task) + timedelta(seconds=1), tick=False)
    for sealed in (contribution, counted):
        releases_keep(sealed, keypers[:2], released_at=_released_at(task))

    assert evaluate_due() == 1

    item = _item(task, contribution)
    assert item["void"] == {
        "code": "source_not_in_task",
        "message": "source_urls[0]: is not one of the task's sources",
    }
    # Not private: published so that anyone can open it and check the void
    assert item["sealed"]["ciphertext"] == contribution.keyper_seal["ciphertext"]
    assert len(item["sealed"]["releases"]) == 2
    assert "report" not in _item(task, contribution) and "report" in _item(task, counted)
    assert task.evaluation["counts"]["source_supported"] == 1


@pytest.mark.parametrize(
    "report",
    [
        contribution_report(summary="Ask the maintainer at maint@example.org, who confirmed it."),
        # Private text where no rule reads it: the report is void for its shape first, and would
        # be published openable, so it is void for what it holds instead
        {**contribution_report(), "contact": "maint@example.org"},
    ],
    ids=["in-a-text", "in-an-unknown-field"],
)
def test_a_report_with_private_content_is_void_and_publishes_nothing_of_it(
    poster, post_task, seal_to, keypers, time_machine, report
):
    task = post_task(poster)
    contribution = seal_to(task, report)
    time_machine.move_to(_released_at(task) + timedelta(seconds=1), tick=False)
    releases_keep(contribution, keypers, released_at=_released_at(task))

    assert evaluate_due() == 1

    item = _item(task, contribution)
    assert item["void"]["code"] == "private_content"
    assert "e-mail" in item["void"]["message"]
    assert item["sealed"] == {
        "ciphertext_digest": contribution.keyper_seal["ciphertext_digest"],
        "threshold": 2,
    }
    assert set(item) == {"contribution_id", "received_at", "commitment", "sealed", "void"}
    public = task.view_json
    assert "maint@example.org" not in public
    assert contribution.keyper_seal["ciphertext"] not in public
    for kept in contribution.releases:
        assert kept["share"] not in public and kept["signature"] not in public
    TaskView.model_validate(stored_view(task))


def _cheating_seal(task: Task, keypers: list[HeldKeyper]) -> dict[str, Any]:
    """A sealed payload whose ciphertext holds another salt than the one its commitment was made
    with: it opens with the key, and its report and salt do not give the commitment logged."""
    report = contribution_report()
    salt, other_salt = (b64u(secrets.token_bytes(32)) for _ in range(2))
    commitment = commitment_of(canonical_digest(report), salt)
    site, deadline = log_origin(), task.deadline_text
    key, nonce = secrets.token_bytes(16), secrets.token_bytes(12)
    aad = report_aad(site=site, task_id=str(task.pk), deadline=deadline, commitment=commitment)
    plaintext = canonical_json({"report": report, "salt": other_salt})
    ciphertext = nonce + AESGCM(key).encrypt(nonce, plaintext, aad)
    context = ShareContext(
        site=site,
        task_id=str(task.pk),
        task_entry=task_entry_index(task),
        deadline=deadline,
        commitment=commitment,
        ciphertext_digest=ciphertext_digest(ciphertext),
        threshold=2,
    )
    shares = [
        {
            "keyper": keyper.name,
            "index": index,
            "sealed_share": b64u(
                SUITE.encrypt(
                    share,
                    keyper.hpke.public_key(),
                    info=context.info(keyper=keyper.name, index=index),
                )
            ),
        }
        for (index, share), keyper in zip(Shamir.split(2, 3, key), keypers, strict=True)
    ]
    return {
        "schema": "cairn.task.contribution.sealed/0.1",
        "task_entry": context.task_entry,
        "commitment": commitment,
        "ciphertext": b64u(ciphertext),
        "shares": shares,
        "approval": {"public_output": True, "scope": "this_contribution", "commitment": commitment},
    }


def test_a_ciphertext_that_does_not_match_its_commitment_is_void_invalid_payload(
    poster, post_task, make_agent, keypers, time_machine
):
    task = post_task(poster)
    contribution = sealed_contribute(make_agent().agent, task, _cheating_seal(task, keypers))
    time_machine.move_to(_released_at(task) + timedelta(seconds=1), tick=False)
    releases_keep(contribution, keypers, released_at=_released_at(task))

    assert evaluate_due() == 1

    item = _item(task, contribution)
    assert item["void"]["code"] == "invalid_payload"
    assert "commitment" in item["void"]["message"]
    assert item["sealed"]["ciphertext"] == contribution.keyper_seal["ciphertext"]
    assert len(item["sealed"]["releases"]) == 3
