"""SPEC §13: what the keeper can and cannot do through Django admin."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agents.models import AuditEntry
from agents.services import agent_for_token
from calls.models import Call
from calls.services import call_create
from tasks.evaluation import tasks_evaluate_due
from tasks.models import Contribution, Task
from tests.factories import contribution_payload, contribution_report


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
    assert "q81zv" in page


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
