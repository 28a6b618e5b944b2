"""SPEC §15.6: until evaluation a report is stored only encrypted; its author still reads it."""

from __future__ import annotations

import sqlite3
import subprocess

import pytest
from cryptography.exceptions import InvalidTag
from django.db import connection

from tasks.evaluation import task_evaluate
from tasks.models import Contribution
from tasks.sealing import contribution_report
from tests.factories import contribution_payload
from tests.factories import contribution_report as report_with

MARKER = "Sealed marker zq7wx4: the transport sets the header on every call."


def database_dump() -> str:
    """What an attacker who copies the database gets: pg_dump, or SQLite's own dump."""
    settings = connection.settings_dict
    if connection.vendor == "postgresql":
        return subprocess.run(
            [
                "pg_dump",
                "-h",
                settings["HOST"] or "127.0.0.1",
                "-U",
                settings["USER"],
                settings["NAME"],
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    with sqlite3.connect(settings["NAME"]) as copy:
        return "\n".join(copy.iterdump())


def test_a_dump_taken_before_the_deadline_holds_no_report_text(
    http, poster, post_task, make_agent, time_machine
):
    task = post_task(poster)
    contributor = make_agent()
    report = report_with(summary=MARKER, verdict="source_contradicted")
    sent = http.post(
        f"/api/a2a-tasks/{task.id}/contributions",
        json=contribution_payload(report),
        headers=contributor.headers,
    )
    assert sent.status_code == 201

    before = database_dump()
    mine = http.get("/api/a2a-tasks/mine", headers=contributor.headers).json()
    time_machine.move_to(task.deadline, tick=True)
    task_evaluate(task_id=task.pk)
    after = database_dump()

    assert MARKER not in before and "zq7wx4" not in before
    assert mine["contributions"][0]["report"] == report
    assert MARKER in after, "once evaluated the report is public, so the dump shows it"
    revealed = Contribution.objects.select_related("task").get()
    assert contribution_report(revealed) == report
    mine = http.get("/api/a2a-tasks/mine", headers=contributor.headers).json()
    assert mine["contributions"][0]["report"] == report


def test_an_evaluated_report_is_read_from_the_evaluation_not_the_seal(
    poster, post_task, make_agent, contribute, time_machine
):
    """Once evaluated, the report's public copy is its task's evaluation: a seal that no longer
    opens (a key changed, bytes damaged) takes nothing from a reader."""
    task = post_task(poster)
    report = report_with(summary=MARKER)
    contribute(make_agent(), task, contribution_payload(report))
    time_machine.move_to(task.deadline, tick=True)
    task_evaluate(task_id=task.pk)
    Contribution.objects.update(sealed_report=b"not a seal")

    assert contribution_report(Contribution.objects.select_related("task").get()) == report


def test_a_sealed_report_moved_to_another_row_does_not_open(
    poster, post_task, make_agent, contribute
):
    task = post_task(poster)
    contribute(make_agent(), task)
    contribute(make_agent(), task, contribution_payload(report_with(summary=MARKER)))
    first, second = Contribution.objects.order_by("seq")

    first.sealed_report = second.sealed_report

    with pytest.raises(InvalidTag):
        contribution_report(first)
