"""SPEC §8.7 and §16 for `python -m cairn.grpc` as it is served: the errors the SDK's client
would never provoke (no version, streaming, push configuration), the bounds, the health service,
the metrics and logs, and the stop."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import h2.config
import h2.connection
import h2.events
import h2.settings
import pytest
from a2a.helpers import new_data_part
from a2a.types import (
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
    a2a_pb2_grpc,
)
from django.db import transaction
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from a2a_gateway.grpc_binding import SERVICE
from agents.models import Agent
from cairn.grpc import MAX_STREAMS_PER_CONNECTION
from tasks.models import Task as TaskRow
from tests.factories import open_task_payload
from tests.grpc.conftest import VERSION, GrpcServer, serving, start_grpc_server

PROMISED_STOP_S = 10  # SPEC §8.7, §16
PROMISED_CUT_S = 30
TOKEN_LIKE = "cairn_" + "t" * 43


def error_info(error: grpc.RpcError) -> tuple[grpc.StatusCode, str]:
    """The status code and the A2A ErrorInfo reason of a refused call."""
    status = status_pb2.Status()
    (details,) = [v for k, v in error.trailing_metadata() if k == "grpc-status-details-bin"]
    status.ParseFromString(details)
    (packed,) = status.details
    info = error_details_pb2.ErrorInfo()
    assert packed.Unpack(info) and info.domain == "a2a-protocol.org"
    return error.code(), info.reason


def refused(call, *args, **kwargs) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        answer = call(*args, **kwargs)
        if hasattr(answer, "__iter__"):
            list(answer)
    return caught.value


def test_the_health_service_says_serving(grpc_server: GrpcServer):
    with grpc.insecure_channel(grpc_server.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", SERVICE):
            answer = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING


def test_the_version_metadata_is_checked_after_the_token_and_before_the_params(
    stub, transactional_db
):
    no_version = refused(stub.GetTask, GetTaskRequest(id="x"))
    assert error_info(no_version) == (grpc.StatusCode.FAILED_PRECONDITION, "VERSION_NOT_SUPPORTED")
    assert "a2a-version" in no_version.details().lower()
    other = refused(stub.ListTasks, ListTasksRequest(), metadata=(("a2a-version", "2.0"),))
    assert error_info(other) == (grpc.StatusCode.FAILED_PRECONDITION, "VERSION_NOT_SUPPORTED")
    assert stub.ListTasks(ListTasksRequest(), metadata=(("a2a-version", "1.2"),)).page_size == 50
    # The token first: a SendMessage without one is UNAUTHENTICATED whatever its version says.
    assert refused(stub.SendMessage, SendMessageRequest()).code() == grpc.StatusCode.UNAUTHENTICATED


def test_what_cairn_does_not_offer_is_this_bindings_unsupported_error(stub, transactional_db):
    task = str(uuid.uuid4())
    cases = [
        (stub.SendStreamingMessage, SendMessageRequest(), "UNSUPPORTED_OPERATION"),
        (stub.SubscribeToTask, SubscribeToTaskRequest(id=task), "UNSUPPORTED_OPERATION"),
        (
            stub.CreateTaskPushNotificationConfig,
            TaskPushNotificationConfig(task_id=task),
            "PUSH_NOTIFICATION_NOT_SUPPORTED",
        ),
        (stub.GetExtendedAgentCard, GetExtendedAgentCardRequest(), "UNSUPPORTED_OPERATION"),
    ]
    for call, request, reason in cases:
        answer = refused(call, request, metadata=VERSION)
        assert error_info(answer) == (grpc.StatusCode.FAILED_PRECONDITION, reason), call


def test_a_bad_page_request_is_invalid_params(stub, transactional_db):
    for request in (
        ListTasksRequest(page_size=101),
        ListTasksRequest(status=42),
        ListTasksRequest(page_token="forged"),
        ListTasksRequest(tenant="other"),
    ):
        answer = refused(stub.ListTasks, request, metadata=VERSION)
        assert error_info(answer) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PARAMS"), request


def test_a_message_over_256_kib_is_refused_and_writes_nothing(stub, poster, transactional_db):
    big = Message(
        message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text="x" * 300_000)]
    )
    answer = refused(
        stub.SendMessage,
        SendMessageRequest(message=big),
        metadata=(*VERSION, ("authorization", f"Bearer {poster.token}")),
    )
    assert answer.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert TaskRow.objects.count() == 0


def _server_settings(address: str) -> dict[int, int]:
    """The HTTP/2 SETTINGS the server sends a new connection."""
    host, port = address.rsplit(":", 1)
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    connection.initiate_connection()
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(connection.data_to_send())
        while True:
            for event in connection.receive_data(sock.recv(65536)):
                if isinstance(event, h2.events.RemoteSettingsChanged):
                    return {key: value.new_value for key, value in event.changed_settings.items()}


def test_a_connection_may_open_a_bounded_number_of_calls_at_once(grpc_server: GrpcServer):
    settings = _server_settings(grpc_server.address)
    assert settings[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] == MAX_STREAMS_PER_CONNECTION


def _seconds_until_closed(sock: socket.socket, started: float) -> float:
    sock.settimeout(PROMISED_CUT_S + 10)
    try:
        while sock.recv(65536):
            pass
    except (ConnectionResetError, TimeoutError):
        pass
    return time.monotonic() - started


def _silent(address: str, found: dict[str, float]) -> None:
    """Connects and never says a word."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        found["silent"] = _seconds_until_closed(sock, time.monotonic())


def _stalled_mid_request(address: str, found: dict[str, float]) -> None:
    """Opens a call, announces a 256-byte request, sends two bytes of it and waits."""
    host, port = address.rsplit(":", 1)
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    connection.initiate_connection()
    headers = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", f"/{SERVICE}/GetTask"),
        (":authority", address),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        ("a2a-version", "1.0"),
    ]
    connection.send_headers(1, headers)
    connection.send_data(1, b"\x00\x00\x00\x01\x00" + b"ab")
    with socket.create_connection((host, int(port))) as sock:
        started = time.monotonic()
        sock.sendall(connection.data_to_send())
        found["stalled"] = _seconds_until_closed(sock, started)


def test_a_client_that_stalls_is_cut_within_30_seconds(grpc_server: GrpcServer):
    found: dict[str, float] = {}
    clients = [
        threading.Thread(target=way, args=(grpc_server.address, found))
        for way in (_silent, _stalled_mid_request)
    ]
    for client in clients:
        client.start()
    for client in clients:
        client.join()
    assert set(found) == {"silent", "stalled"}
    assert all(seconds <= PROMISED_CUT_S for seconds in found.values()), found


def _grpc_calls_counted(metrics: Path) -> dict[tuple[str, str], float]:
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(metrics))
    return {
        (sample.labels["method"], sample.labels["code"]): sample.value
        for metric in registry.collect()
        if metric.name == "cairn_grpc_requests"
        for sample in metric.samples
        if sample.name == "cairn_grpc_requests_total"
    }


def test_calls_are_counted_by_method_and_code(stub, grpc_server: GrpcServer, transactional_db):
    stub.ListTasks(ListTasksRequest(), metadata=VERSION)
    refused(stub.SendMessage, SendMessageRequest(), metadata=VERSION)

    # A call is counted when it ends, and an aborted call's status reaches the client before
    # that (gRPC sends it from `abort`): on a busy machine the count comes a moment later.
    expected = {("ListTasks", "OK"), ("SendMessage", "UNAUTHENTICATED")}
    give_up = time.monotonic() + 30
    while not expected <= set(counted := _grpc_calls_counted(grpc_server.metrics)):
        assert time.monotonic() < give_up, counted
        time.sleep(0.1)
    assert all(counted[key] >= 1 for key in expected), counted


def test_log_lines_are_json_and_hold_no_token(stub, grpc_server: GrpcServer, transactional_db):
    refused(
        stub.SendMessage,
        SendMessageRequest(),
        metadata=(*VERSION, ("authorization", f"Bearer {TOKEN_LIKE}")),
    )
    refused(stub.GetTask, GetTaskRequest(id=TOKEN_LIKE))  # no version: logged by the SDK
    lines = grpc_server.log.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert {"time", "level", "logger", "pid", "message"} <= set(records[0])
    assert any(record["message"].startswith("A2A gRPC binding serving on") for record in records)
    assert TOKEN_LIKE not in grpc_server.log.read_text()


@pytest.fixture
def own_server(django_db_setup, tmp_path) -> Iterator[GrpcServer]:
    server = start_grpc_server(tmp_path)
    yield server
    server.stop()


def _post_over_grpc(address: str, token: str, answers: list) -> None:
    """A SendMessage posting a task, on its own thread; its answer, or its error's code."""
    message = Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=[new_data_part(open_task_payload())],
    )
    with grpc.insecure_channel(address) as channel:
        try:
            answer = a2a_pb2_grpc.A2AServiceStub(channel).SendMessage(
                SendMessageRequest(message=message),
                metadata=(*VERSION, ("authorization", f"Bearer {token}")),
                timeout=30,
            )
        except grpc.RpcError as error:
            answers.append(error.code())
        else:
            answers.append(answer)


@pytest.mark.parametrize("to_group", [False, True], ids=["to_the_process", "to_its_group"])
def test_sigterm_stops_it_within_10_seconds_finishing_the_call_in_flight(
    own_server: GrpcServer, poster, transactional_db, to_group
):
    """A post held in flight (this test holds the lock its write needs) when SIGTERM comes: the
    server takes no new call, the post is answered once the lock is let go, and the server is
    gone within 10 s."""
    answers: list = []
    post = threading.Thread(
        target=_post_over_grpc, args=(own_server.address, poster.token, answers)
    )
    with transaction.atomic():
        Agent.objects.select_for_update().get(pk=poster.agent.pk)  # SQLite: the write lock
        post.start()
        time.sleep(1)  # the call is in the handler, waiting for the lock
        started = time.monotonic()
        if to_group:
            os.killpg(own_server.process.pid, signal.SIGTERM)
        else:
            own_server.process.send_signal(signal.SIGTERM)
        time.sleep(1)
        assert not serving(own_server.address), "a stopping server takes no new call"
        assert post.is_alive(), "the post is still in flight"
    own_server.process.wait(timeout=PROMISED_STOP_S + 5)
    seconds = time.monotonic() - started
    post.join(timeout=30)

    assert seconds <= PROMISED_STOP_S, f"took {seconds:.1f} s\n{own_server.tail()}"
    assert own_server.process.returncode == 0, own_server.tail()
    (answer,) = answers
    assert not isinstance(answer, grpc.StatusCode), f"{answer}\n{own_server.tail()}"
    assert answer.task.status.state == TaskState.TASK_STATE_WORKING
    assert TaskRow.objects.filter(pk=answer.task.id).exists()
    assert '"message": "stopped"' in own_server.log.read_text()
