"""Database connections never cross a fork (SPEC §16).

django-q2 forks its sentinel, workers, monitor and pusher, and forks again whenever it replaces one
that died. A PostgreSQL connection is a socket bound to one server session: a child that inherits
it shares the session with its parent, their statements interleave, and transactions stop being
atomic. So the forking process gives back every connection and closes its pools just before any
fork, and each child opens its own on first use. django-q2 already calls `close_all()` before it
forks, but with a pool that only returns the connection to the pool, which the child then inherits.
"""

from __future__ import annotations

import logging
import os

from django.db import connections

logger = logging.getLogger(__name__)


def release_connections() -> None:
    """Give back every connection this thread holds and close the pools: before a fork, and when
    a process that is not Django's request cycle stops."""
    for connection in connections.all(initialized_only=True):
        try:
            connection.close()
        except Exception:  # noqa: BLE001 (a broken connection is dropped, never inherited)
            logger.warning("dropped a broken %s connection", connection.alias)
            connection.connection = None
        if connection.settings_dict.get("OPTIONS", {}).get("pool"):
            connection.close_pool()  # type: ignore[attr-defined]  # PostgreSQL's wrapper, pooled


def release_connections_at_fork() -> None:
    """Call once per process, at start-up."""
    os.register_at_fork(before=release_connections)
