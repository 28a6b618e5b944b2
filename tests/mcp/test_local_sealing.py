"""SPEC §15.8 through the local server against a live Cairn whose card lists keypers: a report
is sealed by default (the site's receipt says `keypers`, and no door shows the report), its
report and salt are kept for a dispute, `plain: true` sends the plain form, and a card naming
other keypers than those pinned is refused before anything is sent."""

from __future__ import annotations

import json
import stat

import anyio
import pytest

from core.canonical import canonical_digest
from ledger.keyper_seal import b64u_decode, key_combine, report_open
from ledger.notes import log_origin
from tasks.models import Contribution
from tests.factories import contribution_report
from tests.ledger.sealed_evaluations import (
    SealedEvaluation,
    keypers_made,
    sequenced_and_witnessed,
)
from tests.mcp.conftest import call, connected


@pytest.fixture
def keypers(witnessed, settings):
    made = keypers_made(witnessed())
    settings.CAIRN_KEYPERS = made.configured()
    settings.CAIRN_KEYPER_THRESHOLD = 2
    return made


@pytest.fixture
def task(make_agent, post_task):
    posted = post_task(make_agent())
    sequenced_and_witnessed()  # the task's entry under a checkpoint the witnesses cosigned
    return posted


def contribute(server, task_id, report, **arguments):
    async def scenario():
        async with connected(server) as (client,):
            await call(client, "cairn_local_set_consent", {"public_output": True})
            asked = {"task_id": task_id, "report": report, **arguments}
            preview = await call(client, "cairn_a2a_contribute", asked)
            digest = canonical_digest(report)  # the digest the person approves
            sent = await call(
                client, "cairn_a2a_contribute", {**asked, "public_output_digest": digest}
            )
            return preview, sent

    return anyio.run(scenario)


def test_a_report_is_sealed_to_the_sites_keypers_by_default(local_server, keypers, task, http):
    server = local_server("sealer")
    report = contribution_report(summary="Sealed by default: the header is set on every call.")

    preview, sent = contribute(server, str(task.id), report)

    assert preview.data["form"] == "sealed" and preview.data["issues"] == []
    assert not sent.is_error, sent.data
    receipt = sent.data["receipt"]
    assert receipt["sealed"] == "keypers"
    contribution = Contribution.objects.get(id=receipt["contribution_id"])
    assert contribution.keyper_seal is not None and contribution.report_digest == ""
    assert report["summary"] not in http.get(f"/api/a2a-tasks/{task.id}").text
    kept_file = server.home / "sealed" / f"{receipt['contribution_id']}.json"
    kept = json.loads(kept_file.read_text())
    assert stat.S_IMODE(kept_file.stat().st_mode) == 0o600
    assert json.loads((server.home / "receipts" / kept_file.name).read_text()) == receipt
    assert kept["receipt"] == receipt and kept["report"] == report
    built = SealedEvaluation(keypers, task, http)
    payload = kept["sealed"]
    key = key_combine([(n + 1, built.share(payload, n)) for n in (0, 1)], 2)
    opened = report_open(
        b64u_decode(payload["ciphertext"]),
        key,
        site=log_origin(),
        task_id=str(task.id),
        deadline=task.deadline_text,
        commitment=receipt["commitment"],
    )
    assert opened == (report, kept["salt"])
    assert [k["witness_key"] for k in kept["keypers"]] == [w.key for w in keypers.witnesses]


def test_plain_true_sends_the_plain_form(local_server, keypers, task):
    preview, sent = contribute(
        local_server("plain"), str(task.id), contribution_report(), plain=True
    )

    assert preview.data["form"] == "plain"
    assert sent.data["receipt"]["report_digest"] == canonical_digest(contribution_report())
    assert "sealed" not in sent.data["receipt"]


def test_a_card_naming_other_keypers_than_pinned_is_refused_before_sending(
    local_server, keypers, task, make_agent, post_task, settings
):
    server = local_server("pinned")
    first, _ = contribute(server, str(task.id), contribution_report())
    assert first.data["form"] == "sealed"  # the keypers are pinned now
    settings.CAIRN_KEYPERS = keypers_made(keypers.witnesses).configured()
    second_task = post_task(make_agent())
    sequenced_and_witnessed()

    preview, refused = contribute(server, str(second_task.id), contribution_report())

    assert preview.code == refused.code == "keypers_changed"
    assert second_task.contributions.count() == 0
