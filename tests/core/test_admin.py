"""SPEC §13: what the keeper can and cannot do through Django admin."""

from __future__ import annotations

import re
import uuid

import pytest
from django.urls import reverse

from agents.models import AuditEntry, Door
from agents.services import Caller, agent_for_token, agent_revoke
from calls.models import Call
from calls.services import call_create
from tasks.evaluation import tasks_evaluate_due
from tasks.models import Contribution, Task
from tasks.services import task_post
from tests.factories import contribution_payload, contribution_report, open_task_payload


@pytest.fixture
def sealed(poster, post_task, make_agent, contribute):
    task = post_task(poster)
    contributor = make_agent("contributor label")
    report = contribution_report(summary="Sealed marker q81zv: the header is set on every request.")
    contribute(contributor, task, contribution_payload(report))
    return task, contributor, Contribution.objects.get()


def test_the_keeper_sees_who_contributed_but_not_what_before_evaluation(admin_client, sealed):
    task, contributor, contribution = sealed
    listing = admin_client.get(reverse("admin:tasks_contribution_changelist")).content.decode()
    page = admin_client.get(
        reverse("admin:tasks_contribution_change", args=[contribution.pk])
    ).content.decode()
    assert str(contributor.agent.id) in page
    for text in (listing, page):
        assert "q81zv" not in text and "source_supported" not in text
        assert contribution.report_digest not in text
    assert "Sealed until" in page


def test_the_keeper_cannot_search_sealed_content(admin_client, sealed):
    listing = admin_client.get(
        reverse("admin:tasks_contribution_changelist"), {"q": "q81zv"}
    ).content.decode()
    assert "0 contributions" in listing or "0 results" in listing


def test_the_report_shows_once_the_task_is_evaluated(admin_client, sealed, time_machine):
    task, _, contribution = sealed
    time_machine.move_to(task.deadline, tick=True)
    tasks_evaluate_due()
    page = admin_client.get(
        reverse("admin:tasks_contribution_change", args=[contribution.pk])
    ).content.decode()
    assert "q81zv" in page and contribution.report_digest in page


def test_tasks_and_contributions_cannot_be_edited_or_deleted(admin_client, sealed):
    task, _, contribution = sealed
    for name, pk in (("tasks_task", task.pk), ("tasks_contribution", contribution.pk)):
        change = admin_client.get(reverse(f"admin:{name}_change", args=[pk])).content.decode()
        assert 'name="_save"' not in change
        assert (
            admin_client.post(
                reverse(f"admin:{name}_delete", args=[pk]), {"post": "yes"}
            ).status_code
            == 403
        )
        assert admin_client.get(reverse(f"admin:{name}_add")).status_code == 403
    assert (
        Task.objects.filter(pk=task.pk).exists()
        and Contribution.objects.filter(pk=contribution.pk).exists()
    )


def test_the_keeper_revokes_a_token(admin_client, make_agent):
    holder = make_agent()
    response = admin_client.post(
        reverse("admin:agents_agent_changelist"),
        {"action": "revoke_tokens", "_selected_action": [str(holder.agent.id)]},
    )
    assert response.status_code == 302
    assert agent_for_token(holder.token) is None
    assert AuditEntry.objects.filter(
        operation="agent_revoke", door="admin", object_id=str(holder.agent.id)
    ).exists()


def test_the_keeper_opens_and_closes_a_call(admin_client):
    response = admin_client.post(
        reverse("admin:calls_call_add"),
        {
            "title": "Feedback on Cairn",
            "body": "What would make Cairn more useful to you?",
            "kind": "feedback",
        },
    )
    assert response.status_code == 302
    call = Call.objects.get()
    assert call.status == "open" and call.created_at is not None
    admin_client.post(
        reverse("admin:calls_call_changelist"),
        {"action": "close_calls", "_selected_action": [str(call.pk)]},
    )
    call.refresh_from_db()
    assert call.status == "closed" and call.closed_at is not None
    assert list(
        AuditEntry.objects.filter(door="admin").values_list("operation", flat=True).order_by("id")
    ) == [
        "call_create",
        "call_close",
    ]


def test_the_audit_log_is_readable_and_read_only(admin_client, sealed):
    page = admin_client.get(reverse("admin:agents_auditentry_changelist")).content.decode()
    assert "task_post" in page and "contribution_submit" in page
    entry = AuditEntry.objects.first()
    assert (
        admin_client.post(
            reverse("admin:agents_auditentry_delete", args=[entry.pk]), {"post": "yes"}
        ).status_code
        == 403
    )


def test_the_keepers_edit_of_a_call_is_audited(admin_client):
    call = call_create(title="Feedback on Cairn", body="What is missing?", kind="feedback")
    response = admin_client.post(
        reverse("admin:calls_call_change", args=[call.pk]),
        {"title": "Feedback on Cairn, please", "body": "What is missing?", "kind": "feedback"},
    )
    assert response.status_code == 302
    call.refresh_from_db()
    assert call.title == "Feedback on Cairn, please"
    assert AuditEntry.objects.filter(operation="call_edit", object_id=str(call.pk)).exists()


# --- the keeper's daily questions (issue: the first hour) -----------------------------------------


def _listing(admin_client, name: str, **query: str) -> str:
    return admin_client.get(reverse(f"admin:{name}_changelist"), query).content.decode()


def test_the_admin_is_cairns_with_the_sites_icon(admin_client):
    index = admin_client.get(reverse("admin:index")).content.decode()

    assert "<title>The keeper&#x27;s desk | Cairn keeper</title>" in index
    assert 'id="site-name"' in index and "Cairn keeper</a>" in index
    assert "Django administration" not in index and "Django site admin" not in index
    assert 'rel="icon" href="/static/cairn.svg"' in index
    favicon = admin_client.get("/favicon.ico")
    assert favicon.status_code == 301 and favicon["Location"] == "/static/cairn.svg"
    assert admin_client.get("/static/cairn.svg")["Content-Type"].startswith("image/svg+xml")


def test_tasks_read_in_the_public_words_with_times_in_utc(
    admin_client, make_agent, post_task, contribute, raised_caps, time_machine
):
    poster = make_agent()
    resolved, contested, unresolved = (post_task(poster) for _ in range(3))
    for task, verdicts in (
        (resolved, ["source_supported", "source_supported"]),
        (contested, ["source_supported", "source_contradicted"]),
    ):
        for verdict in verdicts:
            contribute(
                make_agent(), task, contribution_payload(contribution_report(verdict=verdict))
            )
    time_machine.move_to(unresolved.deadline, tick=True)  # the last of the three
    tasks_evaluate_due()
    still_open = post_task(poster)

    listing = _listing(admin_client, "tasks_task")

    for words in (
        "evaluated: resolved (source supported)",
        "evaluated: contested",
        "evaluated: unresolved",
        "open",
    ):
        assert f'<td class="field-state">{words}</td>' in listing, words
    assert "Completed" not in listing and "Failed" not in listing
    assert f"{still_open.deadline:%Y-%m-%d %H:%M} UTC" in listing
    only_contested = _listing(admin_client, "tasks_task", state="contested")
    assert contested.title in only_contested and "1 task" in only_contested
    assert '<td class="field-state">evaluated: unresolved</td>' not in only_contested
    page = admin_client.get(reverse("admin:tasks_task_change", args=[unresolved.pk])).content
    assert b"evaluated: unresolved" in page and b" UTC" in page


def test_the_deadline_filter_shows_what_closes_soon_and_what_the_worker_missed(
    admin_client, poster, post_task, time_machine
):
    task = post_task(poster)  # closes in an hour (the factory's deadline)

    assert "1 task" in _listing(admin_client, "tasks_task", deadline="24h")
    assert "0 tasks" in _listing(admin_client, "tasks_task", deadline="overdue")

    # When the deadline passes and no worker has evaluated the task, it shows as overdue
    time_machine.move_to(task.deadline, tick=True)
    overdue = _listing(admin_client, "tasks_task", deadline="overdue")
    assert "1 task" in overdue and '<td class="field-state">open</td>' in overdue
    tasks_evaluate_due()
    assert "0 tasks" in _listing(admin_client, "tasks_task", deadline="overdue")


def test_a_tasks_contributions_are_one_click_away_and_stay_sealed(admin_client, sealed, post_task):
    task, contributor, contribution = sealed
    other = post_task(contributor)

    listing = _listing(admin_client, "tasks_task")
    link = f'href="/admin/tasks/contribution/?task__id__exact={task.pk}">1 / 3</a>'
    assert link in listing
    assert f'?task__id__exact={other.pk}">0 / 3</a>' in listing

    of_task = _listing(admin_client, "tasks_contribution", task__id__exact=str(task.pk))
    assert str(contribution.id) in of_task and "1 contribution" in of_task
    assert "q81zv" not in of_task and "source_supported" not in of_task
    assert str(contribution.id) in _listing(admin_client, "tasks_contribution", sealed="yes")
    assert "0 contributions" in _listing(admin_client, "tasks_contribution", sealed="no")
    task_page = admin_client.get(reverse("admin:tasks_task_change", args=[task.pk])).content
    assert b"q81zv" not in task_page and b"source_supported" not in task_page


def test_agents_filter_by_last_write_and_revoked_token(admin_client, poster, post_task, make_agent):
    post_task(poster)
    silent = make_agent("silent agent")
    revoked = make_agent("revoked agent")
    agent_revoke(agent=revoked.agent)

    recent = _listing(admin_client, "agents_agent", last_write="24h")
    never = _listing(admin_client, "agents_agent", last_write="never")
    assert str(poster.agent.id) in recent and str(silent.agent.id) not in recent
    assert str(silent.agent.id) in never and str(poster.agent.id) not in never
    by_last_write = _listing(admin_client, "agents_agent", o="-4")
    assert by_last_write.index(str(poster.agent.id)) < by_last_write.index(str(silent.agent.id))
    page = admin_client.get(reverse("admin:agents_agent_change", args=[poster.agent.pk]))
    assert re.search(rb"\d{4}-\d\d-\d\d \d\d:\d\d UTC", page.content)
    assert (
        b"never"
        in admin_client.get(reverse("admin:agents_agent_change", args=[silent.agent.pk])).content
    )
    only_revoked = _listing(admin_client, "agents_agent", token="revoked")
    assert str(revoked.agent.id) in only_revoked and str(silent.agent.id) not in only_revoked
    assert str(revoked.agent.id) not in _listing(admin_client, "agents_agent", token="active")


def test_the_audit_log_filters_by_door_and_client(admin_client, make_agent):
    for door, client in ((Door.A2A, "cairn_mcp/0.4.0"), (Door.HTTP, "")):
        task_post(
            Caller(make_agent().agent, str(uuid.uuid4()), door, client), payload=open_task_payload()
        )
    a2a, http = (AuditEntry.objects.get(door=door).object_id for door in (Door.A2A, Door.HTTP))

    by_client = _listing(admin_client, "agents_auditentry", client="cairn_mcp/0.4.0")
    assert a2a in by_client and http not in by_client
    undeclared = _listing(admin_client, "agents_auditentry", client="-")
    assert http in undeclared and a2a not in undeclared
    by_door = _listing(admin_client, "agents_auditentry", door="http")
    assert http in by_door and a2a not in by_door
    everything = _listing(admin_client, "agents_auditentry")
    assert "none declared" in everything and f'href="/admin/tasks/task/{a2a}/change/"' in everything


def test_the_keepers_index_lists_only_the_keepers_things(admin_client):
    index = admin_client.get(reverse("admin:index"))

    listed = {
        app["name"]: sorted(model["name"] for model in app["models"])
        for app in index.context["app_list"]
    }
    assert "Django Q" not in listed and "Axes" not in listed
    # What the keeper uses: the site's own apps, the accounts, and the lockout to lift
    assert listed["Authentication and Authorization"] == ["Users"]
    assert listed["Login lockout"] == ["Access attempts"]
    assert {"Source-review tasks", "Open calls", "Agents and audit"} <= set(listed)
    # And what is left out is not served either
    for path in ("/admin/django_q/schedule/", "/admin/auth/group/", "/admin/axes/accesslog/"):
        assert admin_client.get(path).status_code == 404, path
    assert admin_client.get("/admin/axes/accessattempt/").status_code == 200


def test_the_call_form_says_what_kind_and_body_are(admin_client):
    form = admin_client.get(reverse("admin:calls_call_add")).content.decode()

    help_texts = dict(
        re.findall(
            r'<div class="help" id="id_(\w+)_helptext">\s*<div>(.*?)</div>', form, flags=re.S
        )
    )
    assert "shown beside its title" in help_texts["kind"]
    assert "shown in full on the call's public page" in help_texts["body"]
