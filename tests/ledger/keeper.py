"""The keeper who cheats (SPEC §15): it holds the database and the site key, so it rewrites rows,
recomputes every digest it can, and appends the entries its story needs through the server's own
sequencer, which signs them. What it cannot do is undo an entry already logged."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import datetime
from typing import Any

import rfc8785
from django.utils import timezone

from agents.models import Agent
from ledger.keyper_seal import salt_new
from ledger.logs import log_first
from ledger.merkle import leaf_hash, parents_closed_by
from ledger.models import Checkpoint, Leaf, Node, QueuedEntry
from ledger.seal import report_seal
from ledger.services import checkpoint_publish, log_queue, log_sequence
from ledger.services import contribution_entry as ledger_contribution_entry
from tasks.models import Contribution, Task, TaskStatus
from tasks.rendered import tasks_render
from tests.factories import contribution_report

VERDICTS = ("source_supported", "source_contradicted", "source_unclear")


def digest(value: Any) -> str:
    return "sha256:" + hashlib.sha256(rfc8785.dumps(value)).hexdigest()


def item_rewritten(item: dict[str, Any], **report_changes: Any) -> dict[str, Any]:
    """An evaluation item whose report says something else, with the digest to match."""
    report = {**item["report"], **report_changes}
    return {**item, "report": report, "report_digest": digest(report)}


def evaluation_recounted(evaluation: dict[str, Any], items: list[dict[str, Any]]) -> dict[str, Any]:
    """The evaluation over these items, outcome and counts recomputed by the rule, so the task
    itself checks."""
    verdicts = [item["report"]["verdict"] for item in items]
    if len(verdicts) < evaluation["min_independent"]:
        outcome, verdict = "unresolved", None
    elif len(set(verdicts)) == 1:
        outcome, verdict = "resolved", verdicts[0]
    else:
        outcome, verdict = "contested", None
    return {
        **evaluation,
        "outcome": outcome,
        "verdict": verdict,
        "counts": {name: verdicts.count(name) for name in VERDICTS},
        "contributions": items,
    }


def evaluation_published(task: Task, evaluation: dict[str, Any]) -> None:
    """The task row and every stored form the doors serve, rewritten to the new evaluation."""
    status = TaskStatus.FAILED if evaluation["outcome"] == "unresolved" else TaskStatus.COMPLETED
    Task.objects.filter(pk=task.pk).update(
        evaluation=evaluation,
        outcome=evaluation["outcome"],
        verdict=evaluation["verdict"] or "",
        status=status,
    )
    tasks_render(Task.objects.filter(pk=task.pk))


def contribution_entry(task: Task, item: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "cairn.log/contribution",
        "task_id": str(task.id),
        "contribution_id": item["contribution_id"],
        "commitment": digest({"report_digest": item["report_digest"], "salt": item["salt"]}),
        "received_at": item["received_at"],
    }


def evaluation_entry(task: Task, evaluation: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "cairn.log/evaluation",
        "task_id": str(task.id),
        "outcome": evaluation["outcome"],
        "evaluated_at": evaluation["evaluated_at"],
        "evaluation_digest": digest(evaluation),
    }


def entries_appended(*entries: dict[str, Any]) -> None:
    log_queue(entries)
    log_sequence()


def fake_item(received_at: str, verdict: str, report: dict[str, Any]) -> dict[str, Any]:
    report = {**report, "verdict": verdict}
    return {
        "contribution_id": str(uuid.uuid4()),
        "received_at": received_at,
        "report_digest": digest(report),
        "salt": "A" * 43,
        "report": report,
    }


def contribution_forged(task: Task, agent: Agent, received_at: datetime) -> Contribution:
    """A contribution row the keeper writes itself, dated as it likes, and its entry queued as the
    server would queue it: the evaluation then counts it like any other."""
    report = contribution_report(summary="A report nobody sent, counted all the same.")
    contribution = Contribution(
        task=task,
        agent=agent,
        operation_id=str(uuid.uuid4()),
        report_digest=digest(report),
        salt=salt_new(),
        received_at=received_at,
    )
    contribution.sealed_report = report_seal(
        report, task_id=task.id, contribution_id=contribution.id
    )
    contribution.save()
    log_queue([ledger_contribution_entry(contribution)])
    return contribution


def history_rebuilt(leaves: list[str], *, checkpoints_kept: bool = False) -> None:
    """The log's tree replaced by one over these entries, signed with the site key: what a keeper
    who rewrites or truncates history publishes. Unless kept, the checkpoints (and so the
    cosignatures) of the old history are deleted, so the site shows none of them."""
    Leaf.objects.all().delete()
    Node.objects.all().delete()
    if not checkpoints_kept:
        Checkpoint.objects.all().delete()
    nodes: dict = {}
    rows = []
    for index, entry in enumerate(leaves):
        hashed = leaf_hash(entry.encode())
        for key, value in parents_closed_by(index, hashed, nodes):
            nodes[key] = value
        task = json.loads(entry).get("task_id")
        rows.append(
            Leaf(
                index=index,
                leaf_hash=hashed.hex(),
                entry=entry,
                task_id=task,
                queued_at=timezone.now(),
                integrated_at=timezone.now(),
            )
        )
    Leaf.objects.bulk_create(rows)
    Node.objects.bulk_create(Node(level=k[0], index=k[1], hash=v) for k, v in nodes.items())
    checkpoint_publish(len(leaves), log_first())


def log_rolled_back(size: int) -> None:
    """The log as a database restored to an earlier moment holds it (an older backup, or an
    asynchronous standby promoted while behind): its first `size` entries, their subtrees, and the
    checkpoints of at most that many entries with their cosignatures; everything queued or
    signed after is gone from the site."""
    QueuedEntry.objects.all().delete()
    Leaf.objects.filter(index__gte=size).delete()
    Checkpoint.objects.filter(tree_size__gt=size).delete()
    # A node over leaves [index·2^level, (index+1)·2^level) exists once all of them do.
    for node in Node.objects.all():
        if (node.index + 1) << node.level > size:
            node.delete()
