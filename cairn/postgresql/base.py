"""Django's PostgreSQL backend, failing fast while the database is unreachable (SPEC §16).

Under ASGI every synchronous view of a process runs on one thread, so requests queue: once getting
a connection has failed, the next second's requests fail at once rather than each waiting out the
pool's timeout. A pooled connection is checked before use without a round trip: an idle connection
has nothing to read unless the server has spoken (a termination notice as it stops), so only a
readable one gets psycopg's check.
"""

from __future__ import annotations

import select
import time
from typing import Any

from django.db.backends.postgresql import base
from psycopg import Connection, OperationalError, pq
from psycopg_pool import ConnectionPool

FAIL_FAST_S = 1.0


class DatabaseWrapper(base.DatabaseWrapper):
    # Per process and alias: until when (monotonic) a new connection is not even tried.
    _unreachable_until: dict[str, float] = {}

    def get_new_connection(self, conn_params):
        if time.monotonic() < self._unreachable_until.get(self.alias, 0.0):
            raise OperationalError("the database was unreachable a moment ago")
        try:
            connection = self._checked_connection(conn_params)
        except Exception:
            self._unreachable_until[self.alias] = time.monotonic() + FAIL_FAST_S
            raise
        self._unreachable_until.pop(self.alias, None)
        return connection

    def _checked_connection(self, conn_params: dict[str, Any]) -> Connection[Any]:
        if self.pool is None:
            return super().get_new_connection(conn_params)
        for _ in range(self.pool.max_size + 1):
            connection = super().get_new_connection(conn_params)
            try:
                if connection.closed or connection.pgconn.status != pq.ConnStatus.OK:
                    raise OperationalError("the connection is closed")
                if select.select([connection.fileno()], [], [], 0)[0]:  # the server has spoken
                    ConnectionPool.check_connection(connection)
            except Exception:
                connection.close()
                self.pool.putconn(connection)
                continue
            return connection
        raise OperationalError("no connection from the pool is usable")
