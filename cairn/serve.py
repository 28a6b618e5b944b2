"""Serve Cairn under uvicorn as a deployment should (SPEC §16): `python -m cairn.serve`.

One place for the serving settings that `make run`, the deployment notes and the deployment test
share: uvloop's event loop and httptools' HTTP parser (uvicorn's fast stack: bench/README.md,
"Serving stack"), idle connections closed after a few seconds (including one that never sends a
request, which plain uvicorn keeps open forever), no access log (the proxy in front keeps one),
and the client's address taken from the proxy's headers only when `FORWARDED_ALLOW_IPS` names
the proxy.
"""

from __future__ import annotations

import argparse
import os

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

IDLE_TIMEOUT_S = 5


class IdleClosingHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with its keep-alive timer started as the connection opens, not
    only after a first response: a client that connects and says nothing is closed like an idle one."""

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )


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
        loop="uvloop",
        http=IdleClosingHttpToolsProtocol,
        timeout_keep_alive=IDLE_TIMEOUT_S,
        access_log=False,
        proxy_headers=True,
        forwarded_allow_ips=os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1"),
    )


if __name__ == "__main__":
    main()
