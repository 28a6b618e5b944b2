"""SPEC §15: a keeper with the database and the site key rewrites what it likes and appends the
entries its story needs; the served verifier catches each attack, by the log's rules, by the
evaluation held to its logged contributions, by the receipts, and by the monitor."""

from __future__ import annotations

import json

import rfc8785

from ledger.models import Leaf
from ledger.services import log_sequence
from tasks.evaluation import task_evaluate
from tasks.models import Task
from tests.factories import contribution_payload, contribution_report
from tests.ledger.conftest import load_verifier
from tests.ledger.keeper import (
    VERDICTS,
    contribution_entry,
    digest,
    entries_appended,
    evaluation_entry,
    evaluation_published,
    evaluation_recounted,
    fake_item,
    history_rebuilt,
    item_rewritten,
)


def caught(run, *messages: str) -> str:
    assert run.returncode == 1, run.stdout
    for message in messages:
        assert message in run.stdout, run.stdout
    return run.stdout


def test_an_honest_site_passes_every_command_and_the_monitor_reads_only_what_is_new(
    verify, evaluated
):
    task, receipts = evaluated

    runs = {
        "task": verify("task", str(task.id)),
        "receipt": verify("receipt", str(receipts[1])),
        "log": verify("log", "--full"),
        "monitor": verify("monitor"),
        "monitor again": verify("monitor"),
    }

    for name, run in runs.items():
        assert run.returncode == 0, (name, run.stdout)
        assert "FAIL" not in run.stdout, (name, run.stdout)
    assert "4 new entries read, 4 in all" in runs["monitor"].stdout
    assert "0 new entries read, 4 in all" in runs["monitor again"].stdout
    assert "the root recomputed from every entry" in runs["log"].stdout
    notes = runs["task"].stdout.count("no witnesses are pinned for this site")
    assert notes == 1, "said once: without witnesses a split view cannot be ruled out"


def test_a_report_rewritten_after_evaluation_with_new_entries_appended_is_caught(verify, evaluated):
    task, receipts = evaluated
    assert verify("monitor").returncode == 0
    evaluation = task.evaluation
    touched = item_rewritten(evaluation["contributions"][0], summary="Quietly rewritten later.")
    forged = evaluation_recounted(evaluation, [touched, *evaluation["contributions"][1:]])
    evaluation_published(task, forged)
    entries_appended(contribution_entry(task, touched), evaluation_entry(task, forged))

    cid = touched["contribution_id"]
    caught(
        verify("task", str(task.id)),
        f"contribution {cid} is logged twice",
        "comes after the task's evaluation entry",
        "a second evaluation entry for task",
    )
    caught(verify("monitor"), "a second evaluation entry for task", "is logged twice")
    caught(
        verify("receipt", str(receipts[0])),
        "PROOF OF ALTERATION: the evaluation lists this contribution with another report_digest",
    )


def test_verdicts_changed_and_recounted_are_caught(verify, evaluated):
    task, _ = evaluated
    evaluation = task.evaluation
    items = [
        item_rewritten(item, verdict="source_contradicted") for item in evaluation["contributions"]
    ]
    forged = evaluation_recounted(evaluation, items)
    assert forged["verdict"] == "source_contradicted"
    evaluation_published(task, forged)
    entries_appended(*(contribution_entry(task, i) for i in items), evaluation_entry(task, forged))

    out = caught(verify("task", str(task.id)), "a second evaluation entry for task")
    assert "ok    outcome and verdict recomputed by cairn.rules/0.1" in out, (
        "the story is consistent"
    )
    caught(verify("monitor"), "a second evaluation entry for task")


def test_a_dropped_contribution_is_caught_by_task_monitor_and_its_receipt(verify, evaluated):
    task, receipts = evaluated
    evaluation = task.evaluation
    dropped = evaluation["contributions"][1]["contribution_id"]
    forged = evaluation_recounted(evaluation, evaluation["contributions"][:1])
    assert forged["outcome"] == "unresolved"
    evaluation_published(task, forged)
    entries_appended(evaluation_entry(task, forged))

    caught(
        verify("task", str(task.id)),
        f"the evaluation leaves out logged contribution {dropped}",
        "a second evaluation entry for task",
    )
    caught(verify("monitor"), f"the evaluation leaves out logged contribution {dropped}")
    receipt = caught(
        verify("receipt", str(receipts[1])),
        "PROOF OF OMISSION: the evaluation leaves this contribution out",
    )
    assert json.dumps(json.loads(receipts[1].read_text()), separators=(",", ":")) in receipt


def test_a_fake_contribution_added_to_an_evaluation_is_caught(
    verify, poster, post_task, make_agent, contribute, time_machine
):
    task = post_task(poster)
    contribute(make_agent(), task)
    time_machine.move_to(task.deadline, tick=True)
    task_evaluate(task_id=task.pk)
    log_sequence()
    task = Task.objects.get(pk=task.pk)
    assert task.outcome == "unresolved"
    evaluation = task.evaluation
    real = evaluation["contributions"][0]
    fake = fake_item(real["received_at"], real["report"]["verdict"], real["report"])
    forged = evaluation_recounted(evaluation, [real, fake])
    assert forged["outcome"] == "resolved", "an unresolved task made resolved"
    evaluation_published(task, forged)
    entries_appended(contribution_entry(task, fake), evaluation_entry(task, forged))

    caught(
        verify("task", str(task.id)),
        "comes after the task's evaluation entry",
        "a second evaluation entry for task",
    )
    caught(verify("monitor"), "comes after the task's evaluation entry")


def test_a_back_dated_evaluation_item_fails_its_receipt(verify, evaluated):
    task, receipts = evaluated
    evaluation = task.evaluation
    items = list(evaluation["contributions"])
    items[0] = {**items[0], "received_at": "2020-01-01T00:00:00.000Z"}
    forged = evaluation_recounted(evaluation, items)
    evaluation_published(task, forged)
    entries_appended(evaluation_entry(task, forged))

    caught(
        verify("receipt", str(receipts[0])),
        "PROOF OF ALTERATION: the evaluation lists this contribution with another received_at",
    )
    caught(verify("task", str(task.id)), "with another received_at than the log")


def test_entries_that_do_not_hash_to_the_root_fail_log_full_and_the_monitor(verify, evaluated):
    leaf = Leaf.objects.get(index=1)
    entry = json.loads(leaf.entry) | {"received_at": "2020-01-01T00:00:00.000Z"}
    Leaf.objects.filter(index=1).update(entry=json.dumps(entry, separators=(",", ":")))

    assert verify("log").returncode == 0, "the checkpoint itself is the signed one"
    caught(verify("log", "--full"), "do not hash to the checkpoint's root")
    caught(verify("monitor"), "do not hash to the witnessed checkpoint's root")


def test_a_truncated_history_is_caught_by_a_verifier_that_kept_a_later_checkpoint(
    verify, evaluated
):
    assert verify("log").returncode == 0
    kept = [leaf.entry for leaf in Leaf.objects.order_by("index")]
    history_rebuilt(kept[:2])

    caught(verify("log"), "the log shrank from 4 to 2 entries")


def test_before_the_deadline_the_log_tells_no_sealed_verdict(
    http, poster, post_task, make_agent, contribute
):
    task = post_task(poster)
    reports = {verdict: contribution_report(verdict=verdict) for verdict in VERDICTS}
    receipts = {
        verdict: contribute(make_agent(), task, contribution_payload(report))["receipt"]
        for verdict, report in reports.items()
    }
    log_sequence()
    logged = [
        e["entry"]
        for e in http.get("/api/log/entries", params={"start": 0, "end": 100}).json()["entries"]
        if e["entry"]["type"] == "cairn.log/contribution"
    ]

    guesses = {digest(contribution_report(verdict=verdict)) for verdict in VERDICTS}
    assert len(logged) == 3
    for entry in logged:
        assert "report_digest" not in entry
        assert entry["commitment"] not in guesses
        assert not any(guess in json.dumps(entry) for guess in guesses)
    salted = {
        digest({"report_digest": digest(reports[v]), "salt": receipts[v]["salt"]}) for v in VERDICTS
    }
    assert {entry["commitment"] for entry in logged} == salted, "with the salt, it opens"


def _state_kept_entry_by_entry(entries: list[dict], changed: dict | None = None) -> dict:
    """monitor.json as a monitor that kept every entry parsed saved it, after `entries` (the log's
    first ones): the tree's compact range, and each task with its entries. `changed` replaces the
    last contribution entry kept, as a state that remembers another entry would."""
    verifier = load_verifier()
    tree = verifier.CompactRange()
    tasks: dict = {}
    contributions: dict = {}
    for index, entry in enumerate(entries):
        tree.append(verifier.leaf_hash(rfc8785.dumps(entry)))
        if entry["type"] == "cairn.log/task":
            tasks[entry["task_id"]] = {
                "index": index,
                "entry": entry,
                "contributions": [],
                "evaluation": None,
            }
        else:
            tasks[entry["task_id"]]["contributions"].append({"index": index, "entry": entry})
            contributions[entry["contribution_id"]] = entry["task_id"]
    if changed is not None:
        tasks[entries[0]["task_id"]]["contributions"][-1]["entry"] = changed
    return {"tree": tree.saved(), "rules": {"tasks": tasks, "contributions": contributions}}


def test_the_monitor_reads_the_state_an_earlier_monitor_saved_and_holds_the_log_to_it(
    verify, evaluated, tmp_path
):
    assert verify("monitor").returncode == 0
    (state_file,) = (tmp_path / "home" / "verify").glob("*/monitor.json")
    assert json.loads(state_file.read_text())["version"] == 2
    entries = [json.loads(leaf.entry) for leaf in Leaf.objects.order_by("index")]
    assert [e["type"] for e in entries] == [
        "cairn.log/task",
        "cairn.log/contribution",
        "cairn.log/contribution",
        "cairn.log/evaluation",
    ]

    state_file.write_text(json.dumps(_state_kept_entry_by_entry(entries[:3])))
    run = verify("monitor")
    assert run.returncode == 0, run.stdout
    assert "1 new entry read, 4 in all" in run.stdout
    assert "its evaluation matches its logged contributions" in run.stdout
    assert json.loads(state_file.read_text())["version"] == 2, "saved in the compact form"
    assert "0 new entries read, 4 in all" in verify("monitor").stdout

    other = entries[2] | {"received_at": "2020-01-01T00:00:00.000Z"}
    state_file.write_text(json.dumps(_state_kept_entry_by_entry(entries[:3], changed=other)))
    caught(verify("monitor"), "the site does not serve entry 2 of the task as its log holds it")

    state_file.write_text(json.dumps({"version": 3}))
    caught(verify("monitor"), "was written by a later verifier (state version 3)")
