"""core/policy.py states each door's status words once; these tests hold the words to the statuses
the rows are stored with, so a new status cannot fall out of a door's lists unnoticed."""

from __future__ import annotations

from typing import get_args

import pytest
from a2a.types import TaskState

from calls.models import CallStatus
from core import policy
from tasks.models import TaskStatus

TASK_VOCABULARIES = {
    "http and pages": policy.TASK_MODES,
    "mcp": policy.MCP_TASK_STATUSES,
    "a2a": policy.A2A_TASK_STATES,
}


def listed(vocabulary, every_status):
    statuses = set()
    for selected in vocabulary.values():
        statuses |= every_status if selected is None else selected
    return statuses


def test_the_stored_statuses_are_the_policys():
    assert set(TaskStatus.values) == {
        policy.TASK_WORKING,
        policy.TASK_COMPLETED,
        policy.TASK_FAILED,
    }
    assert set(CallStatus.values) == {policy.CALL_OPEN, policy.CALL_CLOSED}


@pytest.mark.parametrize("vocabulary", TASK_VOCABULARIES.values(), ids=TASK_VOCABULARIES)
def test_every_task_vocabulary_reaches_every_stored_status_and_nothing_else(vocabulary):
    assert listed(vocabulary, set(TaskStatus.values)) == set(TaskStatus.values)


def test_the_call_modes_reach_every_stored_status_and_nothing_else():
    assert listed(policy.CALL_MODES, set(CallStatus.values)) == set(CallStatus.values)


def test_the_mcp_tool_takes_exactly_the_words_it_maps():
    assert get_args(policy.McpTaskStatus) == tuple(policy.MCP_TASK_STATUSES)


def test_the_a2a_words_are_task_states():
    for name in policy.A2A_TASK_STATES:
        assert TaskState.Name(TaskState.Value(name)) == name
