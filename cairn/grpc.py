"""Serve the A2A gRPC binding (SPEC §8.7) and the standard health service on `CAIRN_GRPC_BIND`:
`python -m cairn.grpc`. SPEC §16's bounds are grpcio's options, since no call reaches Python
before its request has arrived whole. gRPC has no timer on a call's request once its stream is
open, so a connection's age (GOAWAY after about `AGE_S`) is what cuts a client that stalls
mid-request; a well-behaved client's channel just opens a new connection. It runs on uvloop, as
the web server does: grpcio's asyncio stack wakes the loop for every completion, and uvloop's wake
is the cheaper. SIGTERM or SIGINT stops it within 10 s.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

import django
import grpc
import uvloop
from asgiref.sync import sync_to_async
from django.conf import settings
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from cairn.connections import release_connections
from cairn.startup import load_settings

logger = logging.getLogger("cairn.grpc")

MAX_STREAMS_PER_CONNECTION = 32
AGE_S = 15
STOP_GRACE_S = 7


async def serve(bind: str) -> None:
    from a2a.types import a2a_pb2_grpc

    from a2a_gateway import read_connections
    from a2a_gateway.grpc_binding import SERVICE, A2ACalls, grpc_handler
    from core.policy import body_limit

    servicer = grpc_handler()
    server = grpc.aio.server(
        interceptors=[A2ACalls(servicer)],
        options=[
            ("grpc.max_receive_message_length", body_limit()),
            ("grpc.max_concurrent_streams", MAX_STREAMS_PER_CONNECTION),
            ("grpc.server_handshake_timeout_ms", 10_000),
            ("grpc.max_connection_idle_ms", 30_000),
            ("grpc.max_connection_age_ms", AGE_S * 1000),
            ("grpc.max_connection_age_grace_ms", 10_000),
            ("grpc.keepalive_time_ms", 10_000),
            ("grpc.keepalive_timeout_ms", 10_000),
            # grpcio shares a port with any other process by default: a second server started
            # on the same address must fail, not split the calls with the first.
            ("grpc.so_reuseport", 0),
        ],
        maximum_concurrent_rpcs=256,
    )
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(servicer, server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    try:
        server.add_insecure_port(bind)
    except RuntimeError:
        sys.exit(f"cairn.grpc: cannot listen on {bind} (CAIRN_GRPC_BIND): is it taken?")

    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)

    await server.start()
    await health_servicer.set(SERVICE, health_pb2.HealthCheckResponse.SERVING)
    logger.info("A2A gRPC binding serving on %s", bind)
    await stopping.wait()
    logger.info("stopping: calls in flight get %d s to finish", STOP_GRACE_S)
    await health_servicer.enter_graceful_shutdown()
    await server.stop(STOP_GRACE_S)
    # The reads' pool is this loop's; each call gave back its ORM connection as it ended, and
    # the ORM's pool is closed from a thread, as Django's connections are used.
    await read_connections.close()
    await sync_to_async(release_connections)()
    logger.info("stopped")


def main() -> None:
    load_settings()
    django.setup()
    bind = settings.CAIRN_GRPC_BIND
    if not bind:
        logger.info("gRPC is off (CAIRN_GRPC_BIND is empty): nothing to serve")
        return
    uvloop.run(serve(bind))


if __name__ == "__main__":
    main()
