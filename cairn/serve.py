"""Serve Cairn under uvicorn as a deployment should (SPEC §16): `python -m cairn.serve`.

One place for the serving settings that `make run`, the deployment notes, the deployment test and
the test suite's live server share: uvloop's event loop and httptools' HTTP parser (uvicorn's fast
stack: bench/README.md, "Serving stack"), idle connections closed after a few seconds (including
one that never sends a request, which plain uvicorn keeps open forever), no access log (the proxy
in front keeps one), and the client's address taken from the proxy's headers only when
`FORWARDED_ALLOW_IPS` names the proxy.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

IDLE_TIMEOUT_S = 5


class CairnHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with two changes.

    Its keep-alive timer starts as the connection opens, not only after a first response, so a
    client that connects and says nothing is closed like an idle one.

    A request head that llhttp refuses but h11 reads (llhttp is stricter: a header value holding
    DEL, say) is handed, with the connection, to uvicorn's h11 protocol, so the application still
    answers it (SPEC §9: a malformed `Idempotency-Key` is `400 invalid_query`, in JSON) instead of
    uvicorn's plain-text 400. Only a head none of whose requests has reached the application can
    be handed over, so nothing is served twice; the bytes of such heads are all this keeps.
    """

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._unanswered = bytearray()
        self._heads_dispatched = 0
        self._in_message = False
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_message = True

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._heads_dispatched += 1

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_message = False

    def data_received(self, data: bytes) -> None:
        if self._heads_dispatched == 0:
            self._unanswered += data
        super().data_received(data)
        if not self._in_message:
            self._unanswered.clear()
            self._heads_dispatched = 0

    def send_400_response(self, msg: str) -> None:
        """Where uvicorn answers a head llhttp refused: handed over instead, when it can be."""
        if self._can_hand_over():
            self._hand_over_to_h11()
        else:
            super().send_400_response(msg)

    def _can_hand_over(self) -> bool:
        return self._heads_dispatched == 0 and (self.cycle is None or self.cycle.response_complete)

    def _hand_over_to_h11(self) -> None:
        self.connections.discard(self)
        protocol = H11Protocol(
            config=self.config,
            server_state=self.server_state,
            app_state=self.app_state,
            _loop=self.loop,
        )
        protocol.connection_made(self.transport)
        self.transport.set_protocol(protocol)
        protocol.data_received(bytes(self._unanswered))


def uvicorn_options() -> dict[str, Any]:
    """The serving options every Cairn server runs with, the test suite's included."""
    return {
        "loop": "uvloop",
        "http": CairnHttpToolsProtocol,
        "timeout_keep_alive": IDLE_TIMEOUT_S,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m cairn.serve", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    parser.add_argument("--workers", type=int, default=1, help="processes (one per core)")
    options = parser.parse_args(argv)
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
