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
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

IDLE_TIMEOUT_S = 5


class CairnHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, whose keep-alive timer starts as the connection opens, not
    only after a first response, so a client that connects and says nothing is closed like an
    idle one. A head llhttp refuses (a header value holding DEL, say) gets uvicorn's plain 400."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )


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
