"""SPEC §15.8's evaluation with real processes: a site and three keypers, each a Cairn of its own.
Reports sealed to the keypers through the site's HTTP route; the site's own sweep (the worker's
`tasks.jobs.evaluate_due`, run in the site's process) asks the keypers with
`ledger.releases.releases_collect`. With one keyper down the report opens with 2 of 3; with two
down it waits, then is void `keys_unavailable` at the end of the grace."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

import httpx

from core.clock import format_instant, parse_instant
from ledger.keyper_seal import seal
from tests.factories import (
    contribution_report,
    deadline_in,
    open_task_payload,
    open_task_request,
)
from tests.ledger.keyper_processes import SiteProcess

GRACE_S = 30
SWEEP = "from tasks.jobs import evaluate_due; print('EVALUATED', evaluate_due())"


def _sweep(site: SiteProcess) -> int:
    """One run of the worker's sweep in the site's process: how many tasks it evaluated."""
    printed = site.shell(SWEEP)
    return int(next(line for line in printed.splitlines() if line.startswith("EVALUATED "))[10:])


def _sleep_until(moment: datetime) -> None:
    time.sleep(max(0.0, moment.timestamp() - time.time()))


def _post_task(http: httpx.Client, site: SiteProcess, deadline: datetime) -> str:
    payload = open_task_payload(open_task_request(deadline=format_instant(deadline)))
    posted = http.post("/api/a2a-tasks", json=payload, headers=site.agent())
    assert posted.status_code == 201, posted.text
    return posted.json()["task"]["id"]


def _seal_and_send(
    http: httpx.Client, site: SiteProcess, keypers, task_id: str, report: dict[str, Any]
) -> dict[str, Any]:
    """What a careful client does: seal the report to the keypers the card lists, for the task's
    log entry and deadline, and send it."""
    (entry,) = [
        e
        for e in http.get(f"/api/log/tasks/{task_id}").json()["entries"]
        if e["entry"]["type"] == "cairn.log/task"
    ]
    payload = seal(
        report,
        site=site.origin,
        task_id=task_id,
        task_entry=entry["index"],
        deadline=entry["entry"]["deadline"],
        keypers=[keyper.keyper for keyper in keypers],
        threshold=2,
    )
    sent = http.post(f"/api/a2a-tasks/{task_id}/contributions", json=payload, headers=site.agent())
    assert sent.status_code == 201, sent.text
    assert sent.json()["receipt"]["sealed"] == "keypers"
    return sent.json()["receipt"]


def test_the_sites_sweep_opens_with_two_of_three_and_voids_with_one_after_the_grace(
    keyper_site,
):
    keypers, site = keyper_site(3, threshold=2, CAIRN_KEYPER_GRACE_S=str(GRACE_S))
    http = httpx.Client(base_url=site.url, timeout=20)
    # Two tasks, the second closing 20 s after the first, so its releases are asked for later.
    # Posting, sealing and two sequencer runs (each a process) come first: on a busy machine,
    # with other tests' processes beside them (xdist's workers), they take over 25 s.
    first_deadline = parse_instant(deadline_in(45))
    second_deadline = first_deadline + timedelta(seconds=20)
    opened_task = _post_task(http, site, first_deadline)
    starved_task = _post_task(http, site, second_deadline)
    site.sequence()
    report = contribution_report()
    opened = _seal_and_send(http, site, keypers, opened_task, report)
    starved = _seal_and_send(http, site, keypers, starved_task, contribution_report())
    site.sequence()  # the contributions' entries under a checkpoint every keyper cosigned
    assert time.time() < first_deadline.timestamp(), "too slow: a task closed before its report"

    # Past the deadline, before the keypers release: no read evaluates it, nor does the sweep
    _sleep_until(first_deadline + timedelta(seconds=1))
    assert _sweep(site) == 0
    assert http.get(f"/api/a2a-tasks/{opened_task}").json()["state"] == "open"

    # From deadline + 60 s with the third keyper down: the first report opens with 2 of 3
    keypers[2].stop()
    _sleep_until(first_deadline + timedelta(seconds=60.5))
    assert _sweep(site) == 1
    view = http.get(f"/api/a2a-tasks/{opened_task}").json()
    assert view["state"] == "evaluated" and view["outcome"] == "unresolved"
    (item,) = view["evaluation"]["contributions"]
    assert item["contribution_id"] == opened["contribution_id"]
    assert item["commitment"] == opened["commitment"] and item["report"] == report
    assert [r["keyper"] for r in item["sealed"]["releases"]] == [k.name for k in keypers[:2]]
    assert view["evaluation"]["counts"]["source_supported"] == 1

    # The second keyper down too: the other task's report waits for a second release
    keypers[1].stop()
    _sleep_until(second_deadline + timedelta(seconds=60.5))
    assert _sweep(site) == 0
    assert http.get(f"/api/a2a-tasks/{starved_task}").json()["state"] == "open"

    # and is void at the end of the grace, published with the one release that came
    _sleep_until(second_deadline + timedelta(seconds=60 + GRACE_S + 0.5))
    assert _sweep(site) == 1
    view = http.get(f"/api/a2a-tasks/{starved_task}").json()
    (item,) = view["evaluation"]["contributions"]
    assert item["contribution_id"] == starved["contribution_id"]
    assert item["void"]["code"] == "keys_unavailable"
    assert [r["keyper"] for r in item["sealed"]["releases"]] == [keypers[0].name]
    assert "report" not in item
    assert _sweep(site) == 0
    http.close()
