"""SPEC §11, §13 and §15.8 on the pages: the task page, the feed, Atom and the keeper's admin say
which contributions were sealed to the keypers, and show each void with its code and reason,
publishing nothing of a report void for private content."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.urls import reverse

from tasks.jobs import evaluate_due
from tasks.models import Contribution, Task
from tests.factories import (
    contribution_payload,
    contribution_report,
    open_task_payload,
    open_task_request,
)
from tests.ledger.sealed_to_keypers import (
    keypers_held,
    releases_keep,
    sealed_contribute,
    sealed_payload,
)

ATOM = "{http://www.w3.org/2005/Atom}"
PRIVATE = "maint@example.org"
OPENED_MARKER = "Marker of the opened report zq7"


@pytest.fixture
def keypers(settings):
    held = keypers_held(3)
    settings.CAIRN_KEYPERS = [
        {"name": k.listed.name, "hpke_key": k.listed.hpke_key, "url": k.listed.url} for k in held
    ]
    settings.CAIRN_KEYPER_THRESHOLD = 2
    settings.CAIRN_KEYPER_GRACE_S = 600
    return held


@dataclass
class Sealed:
    task: Task
    plain: Contribution
    opened: Contribution
    starved: Contribution
    private: Contribution


@pytest.fixture
def sealed_task(poster, post_task, make_agent, contribute, keypers) -> Sealed:
    """A task with a plain report, and three sealed to the keypers: one they open, one without
    enough releases and one holding private content."""
    task = post_task(poster, open_task_payload(open_task_request(max_contributors=4)))
    contribute(
        make_agent(), task, contribution_payload(contribution_report(verdict="source_contradicted"))
    )
    plain = Contribution.objects.get(task=task)
    reports = (
        contribution_report(summary=f"{OPENED_MARKER}: the header is set on every request."),
        contribution_report(),
        contribution_report(summary=f"Ask {PRIVATE}, who confirmed the header is always set."),
    )
    opened, starved, private = (
        sealed_contribute(make_agent().agent, task, sealed_payload(task, report, keypers))
        for report in reports
    )
    return Sealed(task, plain, opened, starved, private)


@pytest.fixture
def evaluated(sealed_task, keypers, time_machine) -> Sealed:
    """The task evaluated by the worker at the end of the keypers' grace."""
    task = sealed_task.task
    released_at = task.deadline + timedelta(seconds=60)
    releases_keep(sealed_task.opened, keypers[:2], released_at=released_at)
    releases_keep(sealed_task.starved, keypers[1:2], released_at=released_at)
    releases_keep(sealed_task.private, keypers[:2], released_at=released_at)
    time_machine.move_to(released_at + timedelta(seconds=600), tick=False)
    assert evaluate_due() == 1
    task.refresh_from_db()
    return sealed_task


def test_the_task_page_names_the_keyper_sealed_reports_and_shows_each_void(client, evaluated):
    page = client.get(f"/a2a/tasks/{evaluated.task.pk}").content.decode()

    cards = re.findall(r'<article class="card contribution.*?</article>', page, re.S)
    assert len(cards) == 4
    plain, opened, starved, private = cards
    assert "sealed to the keypers" not in plain and "Void" not in plain
    for card in (opened, starved, private):
        assert "sealed to the keypers" in card
        assert "Commitment" in card and "Ciphertext digest" in card
    assert OPENED_MARKER in opened and "The report as hashed" in opened
    assert "2 (2 needed to open it)" in opened
    assert 'class="badge badge-void">Void<' in starved
    assert "<code>keys_unavailable</code>" in starved
    assert "did not release its key within their grace" in starved
    assert "1 of the 2 keyper releases needed" in starved
    assert "1 (2 needed to open it)" in starved
    assert "<code>private_content</code>" in private and "e-mail" in private
    assert "not published (2 needed to open it)" in private
    assert PRIVATE not in page
    assert evaluated.private.keyper_seal["ciphertext"] not in page
    # Counts are over the reports that are not void; the voids are counted apart
    assert re.search(r"<th scope=\"row\">Void, counted in no verdict</th><td>2</td>", page)
    assert "3 contributions were sealed to the keypers" in page
    assert 'class="badge badge-contested">Contested<' in page


def test_the_feed_and_atom_say_how_many_were_sealed_to_keypers_and_void(client, evaluated):
    feed = client.get("/a2a", {"mode": "evaluated"}).content.decode()
    atom = ET.fromstring(client.get("/a2a/feed.atom").content)

    assert '<span class="keyper-sealed">3 sealed to the keypers</span>' in feed
    assert '<span class="voids">2 void (keys_unavailable, private_content)</span>' in feed
    (summary,) = [entry.find(f"{ATOM}summary").text for entry in atom.findall(f"{ATOM}entry")]
    assert summary.startswith("Contested. 4 contributions of 2 needed (")
    assert (
        "3 sealed to the keypers. 2 void, counted in no verdict "
        "(keys_unavailable, private_content)." in summary
    )
    assert PRIVATE not in feed and PRIVATE not in summary


def test_the_keepers_task_page_shows_keyper_sealed_reports_and_voids(admin_client, evaluated):
    page = admin_client.get(
        reverse("admin:tasks_task_change", args=[evaluated.task.pk])
    ).content.decode()

    rows = re.findall(r"<tr(?: class=\"[a-z]+\")?><td data-label=\"contribution\">.*?</tr>", page)
    assert len(rows) == 4
    assert sum("keyper-sealed" in row for row in rows) == 3
    assert "void: <code>keys_unavailable</code>" in page
    assert "void: <code>private_content</code>" in page
    assert "Void, counted in no verdict: 2." in page
    assert OPENED_MARKER in page and PRIVATE not in page


def test_the_keepers_contribution_page_says_how_it_was_sealed(admin_client, evaluated):
    def page(contribution: Contribution) -> str:
        url = reverse("admin:tasks_contribution_change", args=[contribution.pk])
        return admin_client.get(url).content.decode()

    starved, plain = page(evaluated.starved), page(evaluated.plain)
    listing = admin_client.get(reverse("admin:tasks_contribution_changelist")).content.decode()

    assert "to the keypers (2 of 3" in starved and "1 released so far" in starved
    assert "<code>keys_unavailable</code>" in starved
    assert "none: the report is void" in starved
    assert "the server, which opens it at the evaluation" in plain
    assert evaluated.plain.report_digest in plain
    assert "column-keyper_sealed" in listing and "To keypers" in listing
    assert PRIVATE not in page(evaluated.private)


def test_before_the_evaluation_the_pages_say_the_task_awaits_its_keys(
    client, admin_client, sealed_task, keypers, time_machine
):
    task = sealed_task.task
    releases_keep(sealed_task.opened, keypers[:1], released_at=task.deadline)
    time_machine.move_to(task.deadline + timedelta(seconds=90), tick=False)
    evaluate_due()

    page = client.get(f"/a2a/tasks/{task.pk}").content.decode()
    keeper = admin_client.get(reverse("admin:tasks_task_change", args=[task.pk])).content.decode()
    awaiting = admin_client.get(
        reverse("admin:tasks_task_changelist"), {"deadline": "keys"}
    ).content.decode()
    overdue = admin_client.get(
        reverse("admin:tasks_task_changelist"), {"deadline": "overdue"}
    ).content.decode()
    sealed = admin_client.get(
        reverse("admin:tasks_contribution_change", args=[sealed_task.opened.pk])
    ).content.decode()

    assert 'class="badge badge-open">Open<' in page and "awaiting-keys" in page
    assert OPENED_MARKER not in page and OPENED_MARKER not in keeper
    assert "open: awaiting the keypers&#x27; releases" in keeper
    assert "at the end of their grace" in keeper
    assert task.title in awaiting and task.title not in overdue
    assert "1 released so far" in sealed and "Sealed until the task is evaluated" in sealed
