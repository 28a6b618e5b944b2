"""Serve Cairn under uvicorn as a deployment should (SPEC §16): `python -m cairn.serve`."""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

# How long a connection may sit idle between requests (and before its first) before it is closed.
IDLE_TIMEOUT_S = 5
HEAD_TIMEOUT_S = 30
BODY_TIMEOUT_S = 30
HEAD_LIMIT = 64 * 1024
# Requests a client may have queued behind the one being answered when more of its bytes arrive.
PIPELINE_LIMIT = 128
# How long the rest of a refused head is read and dropped, so that closing does not reset the
# connection under the 431 before the client has read it.
LINGER_S = 5

_HEAD_TOO_LARGE_TEXT = b"Request head over 64 KiB.\n"
_HEAD_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: %d\r\nconnection: close\r\n\r\n%s"
) % (len(_HEAD_TOO_LARGE_TEXT), _HEAD_TOO_LARGE_TEXT)


class CairnHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with SPEC §16's bounds, which uvicorn has no option for (llhttp
    reads a head of any size, uvicorn's only timer runs between requests, h11 is slower and no
    better). It uses private members that `tests/ops/test_serving.py` checks, of the uvicorn
    versions `pyproject.toml` pins.

    Reads are fed in pieces of at most `HEAD_LIMIT` bytes, so a client that pipelines without
    reading the answers cannot grow uvicorn's queue without end. One deadline runs while the client
    owes bytes (the head's, then the body's), none while the application has the request; the
    keep-alive timer starts as the connection opens, so a silent new connection is closed as idle.
    """

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_bytes: int | None = 0
        self._refused = False
        self._deadline: asyncio.TimerHandle | None = None
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )
        self._close_after(HEAD_TIMEOUT_S)

    def connection_lost(self, exc: Exception | None) -> None:
        self._close_after(None)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        unread = memoryview(data)
        while unread and not self.transport.is_closing():
            if len(self.pipeline) >= PIPELINE_LIMIT:
                self.logger.info("More than %d pipelined requests refused.", PIPELINE_LIMIT)
                self.transport.close()
                return
            room = HEAD_LIMIT if self._head_bytes is None else HEAD_LIMIT - self._head_bytes
            if room == 0:
                self._refuse_head()
                return
            piece, unread = unread[:room], unread[room:]
            if self._head_bytes is not None:
                self._head_bytes += len(piece)
            # A slice of the read, not a copy: httptools' parser reads any buffer.
            super().data_received(piece)  # type: ignore[arg-type]

    def on_headers_complete(self) -> None:
        self._head_bytes = None
        self._close_after(BODY_TIMEOUT_S)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._head_bytes = 0
        self._close_after(HEAD_TIMEOUT_S if self.cycle.response_complete else None)

    def on_response_complete(self) -> None:
        next_is_waiting = bool(self.pipeline)
        super().on_response_complete()
        if self._head_bytes is not None and not next_is_waiting:
            self._close_after(HEAD_TIMEOUT_S)

    def _close_after(self, seconds: float | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = None
        if seconds is not None and not self.transport.is_closing():
            self._deadline = self.loop.call_later(seconds, self.transport.close)

    def _refuse_head(self) -> None:
        """431, unless a response is still due on this connection (that one is not cut into)."""
        self.logger.info("Request head over %d KiB refused.", HEAD_LIMIT // 1024)
        if self.cycle is not None and not self.cycle.response_complete:
            self.transport.close()
            return
        self._refused = True
        self.transport.write(_HEAD_TOO_LARGE)
        self.transport.write_eof()
        self._close_after(LINGER_S)


def uvicorn_options() -> dict[str, Any]:
    """The serving options of every Cairn server. No WebSocket: an upgraded connection would
    outlive the bounds."""
    return {
        "loop": "uvloop",
        "http": CairnHttpToolsProtocol,
        "ws": "none",
        "timeout_keep_alive": IDLE_TIMEOUT_S,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m cairn.serve", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    parser.add_argument("--workers", type=int, default=1, help="processes (one per core)")
    options = parser.parse_args()
    uvicorn.run(
        "cairn.asgi:application",
        host=options.host,
        port=options.port,
        workers=options.workers,
        access_log=False,
        proxy_headers=True,
        forwarded_allow_ips=os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1"),
        **uvicorn_options(),
    )


if __name__ == "__main__":
    main()
