"""SPEC §15.5: the served offline verifier passes on honest data and fails, naming what, on each
way a keeper (or an attacker with the database) could tamper with it."""

from __future__ import annotations

import json
import re

import rfc8785

from ledger.logs import log_first
from ledger.merkle import leaf_hash, parents_closed_by
from ledger.models import Leaf, Node
from ledger.services import checkpoint_publish, log_queue, log_sequence
from tasks.evaluation import task_evaluate
from tasks.models import Contribution, Task
from tasks.rendered import tasks_render


def test_honest_data_verifies(verify, evaluated):
    task, receipts = evaluated

    checked_task = verify("task", str(task.id))
    checked_receipt = verify("receipt", str(receipts[0]))
    checked_log = [verify("log"), verify("log")]

    assert checked_task.returncode == 0, checked_task.stdout
    assert "is in the log" in checked_task.stdout and "FAIL" not in checked_task.stdout
    assert checked_receipt.returncode == 0, checked_receipt.stdout
    assert "the evaluation counts it with the same report digest" in checked_receipt.stdout
    assert [run.returncode for run in checked_log] == [0, 0], checked_log[1].stdout
    assert "extends the" in checked_log[1].stdout


def published_again(task: Task) -> None:
    """The doors serve a task's stored forms (tasks.rendered): whoever edits the row rewrites
    those too, or nobody would see the edit."""
    tasks_render(Task.objects.filter(pk=task.pk))


def test_a_report_edited_after_evaluation_is_caught(verify, evaluated):
    task, _ = evaluated
    edited = task.evaluation
    edited["contributions"][0]["report"]["summary"] = "Quietly rewritten after the deadline."
    Task.objects.filter(pk=task.pk).update(evaluation=edited)
    published_again(task)

    checked = verify("task", str(task.id))

    assert checked.returncode == 1
    cid = edited["contributions"][0]["contribution_id"]
    assert f"the published report differs from the sealed digest for {cid}" in checked.stdout


def test_a_changed_evaluation_outcome_is_caught(verify, evaluated):
    task, _ = evaluated
    changed = {**task.evaluation, "outcome": "contested", "verdict": None}
    Task.objects.filter(pk=task.pk).update(outcome="contested", verdict="", evaluation=changed)
    published_again(task)

    checked = verify("task", str(task.id))

    assert checked.returncode == 1
    assert "cairn.rules/0.1 gives ('resolved', 'source_supported')" in checked.stdout
    assert (
        "the published evaluation differs from the one its log entry commits to" in checked.stdout
    )


def test_a_deleted_contribution_is_proven_omitted_by_its_receipt(
    verify, poster, post_task, make_agent, contribute, time_machine, tmp_path
):
    task = post_task(poster)
    kept = contribute(make_agent(), task)["receipt"]
    dropped = contribute(make_agent(), task)["receipt"]
    Contribution.objects.filter(id=dropped["contribution_id"]).delete()
    Task.objects.filter(pk=task.pk).update(contributions_count=1)
    time_machine.move_to(task.deadline, tick=True)
    task_evaluate(task_id=task.pk)
    log_sequence()
    (tmp_path / "kept.json").write_text(json.dumps(kept))
    (tmp_path / "dropped.json").write_text(json.dumps(dropped))

    honest = verify("receipt", str(tmp_path / "kept.json"))
    checked = verify("receipt", str(tmp_path / "dropped.json"))

    assert honest.returncode == 0, honest.stdout
    assert checked.returncode == 1
    assert "PROOF OF OMISSION: the evaluation leaves this contribution out" in checked.stdout
    assert json.dumps(dropped, separators=(",", ":")) in checked.stdout


def test_a_rewritten_log_leaf_fails_consistency_with_the_checkpoint_seen_before(
    verify, evaluated, settings
):
    assert verify("log").returncode == 0
    size = Leaf.objects.count()
    leaf = Leaf.objects.get(index=1)
    rewritten = json.loads(leaf.entry) | {"report_digest": "sha256:" + "0" * 64}
    leaf.entry = rfc8785.dumps(rewritten).decode()
    leaf.leaf_hash = leaf_hash(leaf.entry.encode()).hex()
    leaf.save()
    # The attacker holds the site key and the site's files too: it forgets what the site signed,
    # rebuilds the tree and signs the rewritten history.
    settings.CAIRN_LOG_STATE.unlink()
    Node.objects.all().delete()
    nodes: dict = {}
    for row in Leaf.objects.order_by("index"):
        for key, value in parents_closed_by(row.index, leaf_hash(row.entry.encode()), nodes):
            nodes[key] = value
    Node.objects.bulk_create(Node(level=k[0], index=k[1], hash=v) for k, v in nodes.items())
    checkpoint_publish(size, log_first())
    log_queue([{"type": "test", "n": 1}])
    log_sequence()

    checked = verify("log")

    assert checked.returncode == 1
    assert "does not extend the tree of" in checked.stdout
    assert "the log rewrote its history" in checked.stdout


def test_a_receipt_with_one_byte_changed_is_refused(verify, evaluated):
    _, receipts = evaluated
    text = receipts[0].read_text()
    position = text.index('"received_at": "') + len('"received_at": "') + 3
    changed = text[:position] + ("1" if text[position] != "1" else "2") + text[position + 1 :]
    receipts[0].write_text(changed)

    checked = verify("receipt", str(receipts[0]))

    assert checked.returncode == 1
    assert "the receipt's fields differ from what its signature covers" in checked.stdout


def test_the_task_page_shows_the_one_command_that_verifies_it(http, live_url, verify, evaluated):
    task, _ = evaluated
    page = http.get(f"/a2a/tasks/{task.id}").text

    command = re.search(r'<pre class="verify-command"><code>([^<]+)</code></pre>', page)[1]
    runner, run, script_url, *args = command.replace("\\\n", " ").split()

    assert (runner, run, script_url) == ("uv", "run", f"{live_url}/verify/cairn_verify.py")
    assert args == ["task", str(task.id)]
    checked = verify(*args)
    assert checked.returncode == 0, checked.stdout


def test_the_task_page_names_every_package_the_verifier_needs(http, evaluated):
    task, _ = evaluated
    served = http.get("/verify/cairn_verify.py").text
    header = re.search(r"^# dependencies = \[(.*)\]$", served, re.MULTILINE)[1]
    needed = [re.match(r'"([A-Za-z0-9_.-]+)', item.strip())[1] for item in header.split(",")]
    page = http.get(f"/a2a/tasks/{task.id}").text

    note = re.search(r"run it with Python 3.11 \(it needs (.*?)\)", page)[1]

    assert re.findall(r"<code>([^<]+)</code>", note) == needed
    assert "pycryptodome" in needed


def test_its_requirements_are_served_as_its_header_names_them(http):
    served = http.get("/verify/cairn_verify.py").text
    header = re.search(r"^# dependencies = \[(.*)\]$", served, re.MULTILINE)[1]

    requirements = http.get("/verify/requirements.txt")

    assert requirements.status_code == 200
    assert requirements.text.splitlines() == [item.strip()[1:-1] for item in header.split(",")]
