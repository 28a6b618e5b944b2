"""SPEC §16 "Serving": what `python -m cairn.serve` bounds, through a real server process."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import re
import socket
import time
from pathlib import Path

import psutil
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
from uvicorn.server import ServerState

from cairn.serve import BODY_TIMEOUT_S, HEAD_LIMIT, HEAD_TIMEOUT_S

MiB = 1024 * 1024
GIVE_UP_S = 45


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _head(size: int) -> bytes:
    """A `GET /healthz` head of exactly `size` bytes, padded by one header, asking the server to
    close the connection once it has answered."""
    start = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nX-Pad: "
    return start + b"p" * (size - len(start) - 4) + b"\r\n\r\n"


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def _peak_rss_since_reset(pid: int) -> int:
    """The process's peak resident set (Linux's VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_a_head_of_64_kib_is_served_and_one_byte_more_is_431(served):
    url, _ = served
    for size, status in ((32 * 1024, 200), (HEAD_LIMIT, 200), (HEAD_LIMIT + 1, 431)):
        with socket.create_connection(("127.0.0.1", _port(url)), timeout=10) as sock:
            sock.sendall(_head(size))
            answer = _answer(sock)
        assert _status(answer) == status, (size, answer[:200])


def test_a_70_kib_head_is_431_in_one_read_or_many(served):
    url, _ = served
    head = _head(70 * 1024)
    for pieces in (1, 70):
        with socket.create_connection(("127.0.0.1", _port(url)), timeout=10) as sock:
            step = len(head) // pieces + 1
            for at in range(0, len(head), step):
                sock.sendall(head[at : at + step])
            answer = _answer(sock)
        assert _status(answer) == 431, answer[:200]
        assert answer.endswith(b"Request head over 64 KiB.\n")


def test_a_64_mib_header_is_431_and_the_worker_grows_by_less_than_16_mib(served_process):
    url, _, server = served_process
    for _ in range(3):  # the first requests' allocations are not the header's
        with socket.create_connection(("127.0.0.1", _port(url)), timeout=10) as sock:
            sock.sendall(_head(32 * 1024))
            assert _status(_answer(sock)) == 200
    Path(f"/proc/{server.pid}/clear_refs").write_text("5")  # the peak, from now on
    before = psutil.Process(server.pid).memory_info().rss

    with socket.create_connection(("127.0.0.1", _port(url)), timeout=30) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: ")
        megabyte = b"b" * MiB
        try:
            for _ in range(64):
                sock.sendall(megabyte)
            sock.sendall(b"\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server stopped reading as soon as it had answered
        answer = _answer(sock)

    grown = _peak_rss_since_reset(server.pid) - before
    assert grown < 16 * MiB, f"the worker grew by {grown / MiB:.1f} MiB"
    assert _status(answer) == 431, answer[:200]


def test_pipelined_requests_and_a_body_are_still_served_in_order(served):
    url, _ = served
    with socket.create_connection(("127.0.0.1", _port(url)), timeout=10) as sock:
        sock.sendall(
            b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"
            b"POST /api/a2a-tasks HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json"
            b"\r\nContent-Length: 2\r\n\r\n{}"
            b"GET /api/no-such-route HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        )
        answer = _answer(sock)
    statuses = [int(status) for status in re.findall(rb"HTTP/1\.1 (\d{3}) ", answer)]
    assert statuses == [200, 401, 404], answer


def test_pipelined_requests_never_read_are_cut_off_before_the_worker_grows_16_mib(served_process):
    """A client sending requests without end and reading no answer: the connection is closed."""
    url, _, server = served_process
    with socket.create_connection(("127.0.0.1", _port(url)), timeout=10) as sock:
        sock.sendall(_head(1024))
        assert _status(_answer(sock)) == 200
    Path(f"/proc/{server.pid}/clear_refs").write_text("5")
    before = psutil.Process(server.pid).memory_info().rss

    request = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"
    with socket.create_connection(("127.0.0.1", _port(url)), timeout=30) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            for _ in range(64):
                sock.sendall(request * (MiB // len(request)))
            raise AssertionError("64 MiB of requests were all taken in")
        time.sleep(0.5)

    grown = _peak_rss_since_reset(server.pid) - before
    assert grown < 16 * MiB, f"the worker grew by {grown / MiB:.1f} MiB"


async def _slow_sender(port: int, start: bytes, trickle: bytes | None) -> float:
    """Sends `start`, then `trickle` a byte a second (or nothing more); the seconds until the
    server closed the connection, `GIVE_UP_S` at most."""
    began = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(start)

    async def trickling() -> None:
        for byte in trickle or b"":
            await asyncio.sleep(1)
            writer.write(bytes([byte]))

    async def until_closed() -> None:
        with contextlib.suppress(ConnectionResetError):
            while await reader.read(4096):
                pass

    dripping = asyncio.create_task(trickling())
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(until_closed(), timeout=GIVE_UP_S)
    dripping.cancel()
    writer.close()
    return time.monotonic() - began


async def _healthz_latencies(port: int, until: asyncio.Future) -> list[float]:
    latencies = []
    while not until.done():
        began = time.monotonic()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        answer = await asyncio.wait_for(reader.read(), timeout=10)
        latencies.append(time.monotonic() - began)
        assert answer.startswith(b"HTTP/1.1 200 "), answer
        writer.close()
        await asyncio.sleep(0.5)
    return latencies


async def _slow_senders(port: int) -> tuple[list[float], list[float]]:
    head = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: "
    body_heads = [
        b"POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n{" % path
        for path in (b"/api/a2a-tasks", b"/api/a2a", b"/api/mcp")
    ]
    senders = [_slow_sender(port, head, b"s" * GIVE_UP_S) for _ in range(30)]
    senders += [_slow_sender(port, body_heads[n % 3], b" " * GIVE_UP_S) for n in range(30)]
    senders += [_slow_sender(port, head, None) for _ in range(5)]  # part of a head, then silence
    senders += [_slow_sender(port, body_heads[0], None) for _ in range(5)]
    everyone = asyncio.gather(*senders)
    latencies = await _healthz_latencies(port, everyone)
    return await everyone, latencies


def test_slow_senders_are_closed_and_hold_up_nobody(served):
    """30 heads and 30 bodies sent a byte a second, and a few that stop half-way: each closed
    within 40 s, while `GET /healthz` keeps answering within a second."""
    url, _ = served
    closed_after, latencies = asyncio.run(_slow_senders(_port(url)))
    assert max(closed_after) < 40, closed_after
    assert min(closed_after) >= min(HEAD_TIMEOUT_S, BODY_TIMEOUT_S) - 1, closed_after
    assert latencies and max(latencies) < 1, latencies


def test_the_uvicorn_members_the_protocol_relies_on_are_still_there():
    """cairn.serve's protocol overrides and uses these; a uvicorn that renames one fails here."""

    async def app(scope, receive, send) -> None: ...

    protocol = HttpToolsProtocol(
        config=Config(app=app, log_config=None),
        server_state=ServerState(),
        app_state={},
        _loop=asyncio.new_event_loop(),
    )
    for name in (
        "transport",
        "cycle",
        "pipeline",
        "loop",
        "logger",
        "timeout_keep_alive",
        "timeout_keep_alive_task",
    ):
        assert name in vars(protocol), name
    for name in (
        "connection_made",
        "connection_lost",
        "data_received",
        "on_headers_complete",
        "on_message_complete",
        "on_response_complete",
        "timeout_keep_alive_handler",
    ):
        assert callable(getattr(HttpToolsProtocol, name)), name
    assert list(inspect.signature(HttpToolsProtocol.data_received).parameters) == ["self", "data"]
    assert list(inspect.signature(HttpToolsProtocol.connection_lost).parameters) == ["self", "exc"]
    for name in ("on_headers_complete", "on_message_complete", "on_response_complete"):
        assert list(inspect.signature(getattr(HttpToolsProtocol, name)).parameters) == ["self"]
    assert "self.response_complete = " in inspect.getsource(RequestResponseCycle.__init__)
    protocol.loop.close()
