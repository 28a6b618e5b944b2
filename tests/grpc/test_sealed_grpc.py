"""SPEC §15.8 over gRPC (§8.7): `python -m cairn.grpc`, configured with keypers through its
environment as a deployed one is, takes a contribution sealed to them from the official a2a-sdk
client allowed only gRPC, and refuses one as it refuses the plain form."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator

import pytest
from a2a.types import Message, Task, TaskState
from google.protobuf.json_format import MessageToDict

from tasks.models import Contribution
from tasks.models import Task as TaskRow
from tests.a2a.conftest import as_json, run
from tests.grpc.conftest import GrpcServer, grpc_client, running_grpc_server
from tests.grpc.test_sdk_client import refusal_code, send, sent
from tests.keypers import (
    SiteKeyper,
    keypers_configure,
    keypers_environment,
    keypers_made,
    sealed_payload,
)
from tests.ledger.conftest import receipt_verified

THRESHOLD = 2


@pytest.fixture(scope="module")
def site_keypers() -> list[SiteKeyper]:
    return keypers_made(3)


@pytest.fixture(scope="module")
def grpc_server(django_db_setup, tmp_path_factory, site_keypers) -> Iterator[GrpcServer]:
    """The module's gRPC server, listing the keypers through its environment."""
    environment = keypers_environment(site_keypers, THRESHOLD)
    with running_grpc_server(tmp_path_factory.mktemp("grpc"), **environment) as server:
        yield server


@pytest.fixture
def keypers(settings, site_keypers) -> list[SiteKeyper]:
    """The web server (which publishes the card) lists the same keypers."""
    keypers_configure(settings, site_keypers, THRESHOLD)
    return site_keypers


def test_a_grpc_client_sends_a_sealed_contribution(
    card_url, http, keypers, poster, post_task, make_agent
):
    task = post_task(poster)
    payload = sealed_payload(task, keypers, THRESHOLD)
    token, message_id = make_agent().token, str(uuid.uuid4())

    async def contribute() -> tuple[Task | Message, Task | Message]:
        async with grpc_client(card_url, token) as client:
            first = await send(client, sent(payload, task_id=str(task.pk), message_id=message_id))
            again = await send(client, sent(payload, task_id=str(task.pk), message_id=message_id))
            return first, again

    first, again = run(contribute())

    assert isinstance(first, Task) and first.status.state == TaskState.TASK_STATE_WORKING
    assert again == first
    receipt = as_json(MessageToDict(first.metadata))["cairn"]["contribution"]
    assert (receipt["sealed"], receipt["commitment"]) == ("keypers", payload["commitment"])
    assert (receipt["task_id"], receipt["operation_id"]) == (str(task.pk), message_id)
    receipt_verified(receipt, http)
    row = Contribution.objects.get()
    assert row.keyper_seal["ciphertext_digest"] == receipt["ciphertext_digest"]
    assert row.sealed_report is None
    assert TaskRow.objects.get(pk=task.pk).keys_pending is True


def test_a_grpc_client_is_refused_as_on_every_binding(
    card_url, keypers, poster, post_task, make_agent
):
    task = post_task(poster)
    payload = sealed_payload(task, keypers, THRESHOLD)
    missing = copy.deepcopy(payload)
    missing["shares"].pop()
    other = copy.deepcopy(payload)
    other["approval"]["commitment"] = "sha256:" + "0" * 64
    token = make_agent().token

    async def refused() -> list[Task | Message]:
        answers = []
        async with grpc_client(card_url, poster.token) as client:
            answers.append(await send(client, sent(payload, task_id=str(task.pk))))
        async with grpc_client(card_url, token) as client:
            for changed in (missing, other):
                answers.append(await send(client, sent(changed, task_id=str(task.pk))))
        return answers

    codes = [refusal_code(answer) for answer in run(refused())]

    assert codes == ["own_task", "invalid_payload", "preview_changed"]
    assert Contribution.objects.count() == 0
