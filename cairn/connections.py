"""Database connections never cross a fork (SPEC §16): a child that inherits a PostgreSQL
connection shares its server session with the parent, and django-q2's `close_all()` before a fork
only returns a pooled connection to the pool, which the child then inherits.
"""

from __future__ import annotations

import logging

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
