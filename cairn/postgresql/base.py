"""Django's PostgreSQL backend, failing fast while the database is unreachable (SPEC §16).

Under ASGI, Django runs every synchronous view on one thread per process, so requests queue behind
one another: if each of them waited out the pool's timeout while the database is down, the tenth
would wait ten times as long. Once getting a connection has failed, the next second's requests
fail at once; after that one request tries again, so the server finds the database within a
second or two of its return.
"""

from __future__ import annotations

import time

from django.db.backends.postgresql import base
from psycopg import OperationalError

FAIL_FAST_S = 1.0


class DatabaseWrapper(base.DatabaseWrapper):
    # Per process and alias: until when (monotonic) a new connection is not even tried.
    _unreachable_until: dict[str, float] = {}

    def get_new_connection(self, conn_params):
        if time.monotonic() < self._unreachable_until.get(self.alias, 0.0):
            raise OperationalError("the database was unreachable a moment ago")
        try:
            connection = super().get_new_connection(conn_params)
        except Exception:
            self._unreachable_until[self.alias] = time.monotonic() + FAIL_FAST_S
            raise
        self._unreachable_until.pop(self.alias, None)
        return connection
