"""SPEC §15.8 at receipt, through `POST /api/a2a-tasks/{id}/contributions`: a report sealed to the
site's keypers is taken with what can be checked without its plaintext, stored as its envelope,
logged with its contributor's commitment and answered with a signed receipt; everything the plain
form is refused for at receipt refuses it with the same code; the plain form keeps working."""

from __future__ import annotations

import copy
import hashlib
import threading
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from django.core.management import call_command

from ledger.keyper_seal import b64u, b64u_decode
from ledger.services import log_sequence
from tasks.models import Contribution, Task
from tasks.payloads import CIPHERTEXT_MAX_BYTES, CIPHERTEXT_MIN_BYTES
from tasks.view_models import KeyperReceipt, Receipt
from tests.conftest import postgres_only
from tests.factories import (
    contribution_payload,
    contribution_report,
    deadline_in,
    open_task_payload,
    open_task_request,
)
from tests.http.conftest import refused, wait_past
from tests.keypers import (
    SiteKeyper,
    keypers_configure,
    keypers_made,
    logged_entry,
    sealed_payload,
)
from tests.ledger.conftest import receipt_verified

THRESHOLD = 2
# Words no surface may show before the deadline: only the contributor's ciphertext holds them.
SECRET_SUMMARY = "The zebra-quartz constant is read from A2A_PROTOCOL_VERSION in the transport."
RECEIPT_KEYS = [
    "contribution_id",
    "task_id",
    "operation_id",
    "commitment",
    "ciphertext_digest",
    "sealed",
    "received_at",
    "sealed_until",
    "signature",
]


@pytest.fixture
def keypers(settings) -> list[SiteKeyper]:
    """Three keypers listed by the site, any two of which release a key."""
    made = keypers_made(3)
    keypers_configure(settings, made, THRESHOLD)
    return made


def _send(
    http: httpx.Client, by: Any, task: Task, payload: Any, key: str | None = None
) -> httpx.Response:
    headers = by.headers | ({"Idempotency-Key": key} if key else {})
    return http.post(f"/api/a2a-tasks/{task.pk}/contributions", json=payload, headers=headers)


def _digest(ciphertext: str) -> str:
    return "sha256:" + hashlib.sha256(b64u_decode(ciphertext)).hexdigest()


def test_a_sealed_contribution_gets_a_signed_keyper_receipt_and_a_replay_repeats_it(
    http, keypers, poster, post_task, make_agent
):
    task = post_task(poster)
    payload = sealed_payload(task, keypers, THRESHOLD)
    contributor = make_agent()

    first = _send(http, contributor, task, payload, key="sealed-once")
    again = _send(http, contributor, task, payload, key="sealed-once")

    assert first.status_code == again.status_code == 201, first.text
    receipt = first.json()["receipt"]
    assert list(receipt) == RECEIPT_KEYS
    KeyperReceipt.model_validate(receipt)
    assert receipt["commitment"] == payload["commitment"]
    assert receipt["ciphertext_digest"] == _digest(payload["ciphertext"])
    assert receipt["sealed"] == "keypers"
    assert (receipt["task_id"], receipt["operation_id"], receipt["sealed_until"]) == (
        str(task.pk),
        "sealed-once",
        task.deadline_text,
    )
    receipt_verified(receipt, http)
    assert first.json()["task"]["contributions_received"] == 1
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert Contribution.objects.count() == 1


def test_the_row_keeps_the_envelope_and_no_report_and_the_task_waits_for_keys(
    http, keypers, poster, post_task, make_agent
):
    task = post_task(poster)
    payload = sealed_payload(task, keypers, THRESHOLD)

    receipt = _send(http, make_agent(), task, payload).json()["receipt"]

    row = Contribution.objects.get(id=receipt["contribution_id"])
    assert row.keyper_seal == {
        "task_entry": payload["task_entry"],
        "commitment": payload["commitment"],
        "ciphertext": payload["ciphertext"],
        "ciphertext_digest": receipt["ciphertext_digest"],
        "threshold": THRESHOLD,
        "shares": payload["shares"],
    }
    assert (row.report_digest, row.salt, row.sealed_report, row.releases) == ("", "", None, [])
    assert Task.objects.get(pk=task.pk).keys_pending is True


def test_the_log_holds_the_contributors_commitment(http, keypers, poster, post_task, make_agent):
    task = post_task(poster)
    payload = sealed_payload(task, keypers, THRESHOLD)
    receipt = _send(http, make_agent(), task, payload).json()["receipt"]

    log_sequence()

    entries = http.get(f"/api/log/tasks/{task.pk}").json()["entries"]
    assert [item["index"] for item in entries][0] == payload["task_entry"]
    assert entries[0]["entry"]["type"] == "cairn.log/task"
    assert entries[1]["entry"] == {
        "type": "cairn.log/contribution",
        "task_id": str(task.pk),
        "contribution_id": receipt["contribution_id"],
        "commitment": payload["commitment"],
        "received_at": receipt["received_at"],
    }


def test_no_surface_and_no_dump_holds_the_report_and_mine_shows_it_keyper_sealed(
    http, keypers, poster, post_task, make_agent, tmp_path
):
    task = post_task(poster)
    payload = sealed_payload(task, keypers, THRESHOLD, contribution_report(summary=SECRET_SUMMARY))
    contributor = make_agent()
    receipt = _send(http, contributor, task, payload).json()["receipt"]
    log_sequence()

    surfaces = [
        http.get(f"/api/a2a-tasks/{task.pk}").text,
        http.get("/api/a2a-tasks", params={"mode": "all"}).text,
        http.get("/api/log/entries", params={"start": 0, "end": 10}).text,
        http.get(f"/api/log/tasks/{task.pk}").text,
        http.get(f"/a2a/tasks/{task.pk}").text,
        http.get("/a2a").text,
        http.get("/a2a/feed.atom").text,
        http.post(
            "/api/a2a",
            json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": str(task.pk)}},
            headers={"A2A-Version": "1.0"},
        ).text,
        http.get("/api/a2a-tasks/mine", headers=poster.headers).text,
    ]
    dump = tmp_path / "dump.json"
    call_command("dumpdata", output=str(dump), verbosity=0)

    for text in surfaces:
        assert "zebra-quartz" not in text
        assert payload["ciphertext"][:64] not in text
    assert "zebra-quartz" not in dump.read_text()
    mine = http.get("/api/a2a-tasks/mine", headers=contributor.headers).json()
    assert mine["contributions"] == [{"task_id": str(task.pk), "receipt": receipt, "report": None}]


def test_the_plain_form_works_beside_it_and_leaves_the_task_waiting_for_keys(
    http, keypers, poster, post_task, make_agent
):
    task = post_task(poster)
    sealed = _send(http, make_agent(), task, sealed_payload(task, keypers, THRESHOLD))

    plain = _send(http, make_agent(), task, contribution_payload())

    assert sealed.status_code == plain.status_code == 201
    receipt = plain.json()["receipt"]
    Receipt.model_validate(receipt)
    assert "sealed" not in receipt and receipt["report_digest"] and receipt["salt"]
    assert plain.json()["task"]["contributions_received"] == 2
    assert Task.objects.get(pk=task.pk).keys_pending is True


def test_a_site_without_keypers_takes_only_the_plain_form(http, poster, post_task, make_agent):
    task = post_task(poster)
    payload = sealed_payload(task, keypers_made(3), THRESHOLD)

    error = refused(_send(http, make_agent(), task, payload), 422, "unknown_schema")

    assert "lists no keypers" in error["message"]
    assert "'cairn.task.contribution/0.1'" in error["message"]
    assert [issue["path"] for issue in error["issues"]] == ["schema"]
    assert _send(http, make_agent(), task, contribution_payload()).status_code == 201


def test_an_unknown_schema_is_told_both_forms_when_the_site_lists_keypers(
    http, keypers, poster, post_task, make_agent
):
    task = post_task(poster)
    payload = {**sealed_payload(task, keypers, THRESHOLD), "schema": "cairn.task.contribution/9"}

    error = refused(_send(http, make_agent(), task, payload), 422, "unknown_schema")

    assert (
        "'cairn.task.contribution/0.1' or 'cairn.task.contribution.sealed/0.1'"
        in (error["message"])
    )


def _shares(change: Callable[[list[dict]], Any]) -> Callable[[dict], None]:
    def apply(payload: dict) -> None:
        change(payload["shares"])

    return apply


def _swap(shares: list[dict]) -> None:
    shares[0], shares[1] = shares[1], shares[0]


ENVELOPE_REFUSALS: dict[str, tuple[Callable[[dict], Any], set[str]]] = {
    "a keyper missing": (_shares(lambda shares: shares.pop()), {"shares"}),
    "a keyper twice": (
        _shares(lambda shares: shares.__setitem__(1, copy.deepcopy(shares[0]))),
        {"shares[1].keyper", "shares[1].index"},
    ),
    "keypers out of order": (
        _shares(_swap),
        {"shares[0].keyper", "shares[0].index", "shares[1].keyper", "shares[1].index"},
    ),
    "a keyper the site does not list": (
        _shares(lambda shares: shares[2].update(keyper="k9.keyper.test/cairn/witness")),
        {"shares[2].keyper"},
    ),
    "an index off by one": (
        _shares(lambda shares: shares[2].update(index=4)),
        {"shares[2].index"},
    ),
    "a share too short": (
        _shares(lambda shares: shares[0].update(sealed_share=b64u(bytes(63)))),
        {"shares[0].sealed_share"},
    ),
    "a share too long": (
        _shares(lambda shares: shares[0].update(sealed_share=b64u(bytes(65)))),
        {"shares[0].sealed_share"},
    ),
    "a share in base64 with padding": (
        _shares(lambda shares: shares[0].update(sealed_share=b64u(bytes(63)) + "=")),
        {"shares[0].sealed_share"},
    ),
    "a share in standard base64": (
        _shares(lambda shares: shares[0].update(sealed_share="+/" + b64u(bytes(63))[2:])),
        {"shares[0].sealed_share"},
    ),
    "a ciphertext shorter than a nonce and a tag": (
        lambda payload: payload.update(ciphertext=b64u(bytes(CIPHERTEXT_MIN_BYTES - 1))),
        {"ciphertext"},
    ),
    "a ciphertext longer than the largest report": (
        lambda payload: payload.update(ciphertext=b64u(bytes(CIPHERTEXT_MAX_BYTES + 1))),
        {"ciphertext"},
    ),
    "a ciphertext with padding": (
        lambda payload: payload.update(ciphertext=payload["ciphertext"] + "=="),
        {"ciphertext"},
    ),
    "a ciphertext whose last character is not canonical": (
        lambda payload: payload.update(ciphertext=b64u(bytes(40))[:-1] + "B"),
        {"ciphertext"},
    ),
    "a negative task entry": (lambda payload: payload.update(task_entry=-1), {"task_entry"}),
    "a task entry written as text": (
        lambda payload: payload.update(task_entry=str(payload["task_entry"])),
        {"task_entry"},
    ),
    "a threshold of the contributor's own": (
        lambda payload: payload.update(threshold=3),
        {"threshold"},
    ),
    "a plain report beside the ciphertext": (
        lambda payload: payload.update(verdict="source_supported"),
        {"verdict"},
    ),
    "no approval": (lambda payload: payload.pop("approval"), {"approval"}),
}


@pytest.mark.parametrize("case", list(ENVELOPE_REFUSALS))
def test_an_envelope_the_keypers_could_not_open_is_an_invalid_payload(
    case, http, keypers, poster, post_task, make_agent
):
    task = post_task(poster)
    payload = sealed_payload(task, keypers, THRESHOLD)
    change, paths = ENVELOPE_REFUSALS[case]
    change(payload)

    error = refused(_send(http, make_agent(), task, payload), 422, "invalid_payload", case)

    assert {issue["path"] for issue in error["issues"]} == paths, (case, error)
    assert {issue["code"] for issue in error["issues"]} == {"invalid_payload"}
    assert Contribution.objects.count() == 0
    assert Task.objects.get(pk=task.pk).keys_pending is False


def test_the_threshold_kept_is_the_sites(http, keypers, poster, post_task, make_agent, settings):
    """The payload names no threshold: the shares are sealed to the one the card lists, which
    the envelope keeps for the keypers' releases (each rebuilds its `info` with it)."""
    task = post_task(poster)
    receipt = _send(http, make_agent(), task, sealed_payload(task, keypers, THRESHOLD)).json()
    settings.CAIRN_KEYPER_THRESHOLD = 3
    later = _send(http, make_agent(), task, sealed_payload(task, keypers, 3)).json()

    kept = [
        Contribution.objects.get(id=answer["receipt"]["contribution_id"]).keyper_seal["threshold"]
        for answer in (receipt, later)
    ]
    assert kept == [THRESHOLD, 3]


APPROVAL_REFUSALS = {
    "not public": ({"public_output": False}, "approval_required", {"approval.public_output"}),
    "another scope": ({"scope": "this_open_task"}, "approval_required", {"approval.scope"}),
    "another commitment": (
        {"commitment": "sha256:" + "0" * 64},
        "preview_changed",
        {"approval.commitment"},
    ),
}


@pytest.mark.parametrize("case", list(APPROVAL_REFUSALS))
def test_an_approval_that_is_not_of_this_sealed_report_is_refused_as_the_plain_ones_are(
    case, http, keypers, poster, post_task, make_agent
):
    task = post_task(poster)
    payload = sealed_payload(task, keypers, THRESHOLD)
    change, code, paths = APPROVAL_REFUSALS[case]
    payload["approval"].update(change)

    error = refused(_send(http, make_agent(), task, payload), 422, code, case)

    assert {issue["path"] for issue in error["issues"]} == paths
    assert Contribution.objects.count() == 0


def test_the_entry_of_another_task_is_an_invalid_payload(
    http, keypers, poster, post_task, make_agent
):
    task, other = post_task(poster), post_task(make_agent())
    right, wrong = logged_entry(task), logged_entry(other)
    payload = sealed_payload(task, keypers, THRESHOLD, task_entry=wrong)

    error = refused(_send(http, make_agent(), task, payload), 422, "invalid_payload")

    (issue,) = error["issues"]
    assert issue == {
        "path": "task_entry",
        "code": "invalid_payload",
        "message": f"is not this task's log entry, which is entry {right}",
    }


def test_a_task_whose_entry_is_not_logged_yet_says_to_retry_soon(
    http, keypers, poster, post_task, make_agent
):
    task = post_task(poster)
    payload = sealed_payload(task, keypers, THRESHOLD, task_entry=0)

    error = refused(_send(http, make_agent(), task, payload), 422, "invalid_payload")

    (issue,) = error["issues"]
    assert issue["path"] == "task_entry" and "retry in a few seconds" in issue["message"]
    log_sequence()
    assert _send(http, make_agent(), task, payload).status_code == 201


def test_a_sealed_contribution_to_ones_own_task_is_refused(http, keypers, poster, post_task):
    task = post_task(poster)

    refused(_send(http, poster, task, sealed_payload(task, keypers, THRESHOLD)), 409, "own_task")


def test_a_closed_task_takes_no_sealed_contribution(
    http, keypers, poster, post_task, make_agent, short_deadlines
):
    task = post_task(poster, open_task_payload(open_task_request(deadline=deadline_in(1.5))))
    payload = sealed_payload(task, keypers, THRESHOLD)
    wait_past(task.deadline_text)

    refused(_send(http, make_agent(), task, payload), 409, "task_closed")
    assert Contribution.objects.count() == 0


@pytest.mark.parametrize("first", ["plain", "sealed"])
def test_one_contribution_per_agent_whatever_its_form(
    first, http, keypers, poster, post_task, make_agent
):
    task = post_task(poster)
    contributor = make_agent()
    before = contribution_payload() if first == "plain" else sealed_payload(task, keypers, 2)
    assert _send(http, contributor, task, before).status_code == 201

    again = _send(http, contributor, task, sealed_payload(task, keypers, THRESHOLD))

    refused(again, 409, "duplicate_contribution")
    assert Contribution.objects.count() == 1


def test_a_full_task_takes_no_sealed_contribution(http, keypers, poster, post_task, make_agent):
    task = post_task(poster, open_task_payload(open_task_request(max_contributors=2)))
    assert _send(http, make_agent(), task, contribution_payload()).status_code == 201
    assert _send(http, make_agent(), task, sealed_payload(task, keypers, 2)).status_code == 201

    full = _send(http, make_agent(), task, sealed_payload(task, keypers, THRESHOLD))

    refused(full, 409, "task_full")
    assert Task.objects.get(pk=task.pk).contributions_count == 2


def test_sealed_contributions_count_toward_the_daily_cap(
    http, keypers, post_task, make_agent, settings
):
    settings.CAIRN_CONTRIBUTIONS_PER_AGENT_PER_DAY = 2
    tasks = [post_task(make_agent()) for _ in range(3)]
    contributor = make_agent()
    assert _send(http, contributor, tasks[0], contribution_payload()).status_code == 201
    sealed = _send(http, contributor, tasks[1], sealed_payload(tasks[1], keypers, THRESHOLD))
    assert sealed.status_code == 201

    capped = _send(http, contributor, tasks[2], sealed_payload(tasks[2], keypers, THRESHOLD))

    error = refused(capped, 429, "daily_cap")
    assert "2 contributions per agent" in error["message"]
    assert Task.objects.get(pk=tasks[2].pk).keys_pending is False


@postgres_only()
def test_concurrent_contributions_of_both_forms_fill_a_task_exactly(
    live_url, keypers, poster, post_task, make_agent
):
    task = post_task(poster, open_task_payload(open_task_request(max_contributors=3)))
    payloads = [
        sealed_payload(task, keypers, THRESHOLD) if n % 2 else contribution_payload()
        for n in range(8)
    ]
    agents = [make_agent() for _ in payloads]
    start = threading.Barrier(len(payloads))
    statuses: list[int] = []

    def send(agent: Any, payload: dict) -> None:
        with httpx.Client(base_url=live_url, timeout=30) as client:
            start.wait()
            response = client.post(
                f"/api/a2a-tasks/{task.pk}/contributions",
                json=payload,
                headers=agent.headers | {"Idempotency-Key": str(uuid.uuid4())},
            )
            statuses.append(response.status_code)

    threads = [
        threading.Thread(target=send, args=pair) for pair in zip(agents, payloads, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(statuses) == [201] * 3 + [409] * 5
    row = Task.objects.get(pk=task.pk)
    assert row.contributions_count == Contribution.objects.filter(task=task).count() == 3
    sealed = Contribution.objects.filter(task=task, keyper_seal__isnull=False).exists()
    assert row.keys_pending is sealed
