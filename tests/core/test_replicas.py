"""Read replicas (SPEC §16.1) as the settings give them, and what their absence costs: nothing.
How reads land on a replica, and what a lagging or stopped one changes, is
`tests/deploy/test_replicas.py`, on a real primary and a streaming replica of its own."""

from __future__ import annotations

import threading

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS

from cairn.settings import _replicas
from core import replicas

PRIMARY = {"ENGINE": "cairn.postgresql"}


def test_each_replica_url_is_a_database_of_its_own_with_its_options():
    found = _replicas(
        "postgres://cairn@r1.example:5433/cairn?sslmode=verify-full&application_name=reads,"
        " postgres://cairn@r2.example/cairn\tpostgres://cairn@r3.example/cairn",
        PRIMARY,
    )
    assert list(found) == ["replica1", "replica2", "replica3"]
    first = found["replica1"]
    assert (first["HOST"], first["PORT"], first["NAME"]) == ("r1.example", 5433, "cairn")
    assert first["OPTIONS"]["sslmode"] == "verify-full"
    assert first["OPTIONS"]["application_name"] == "reads"
    # Tests never make a replica's database: it is the primary's, streamed.
    assert all(replica["TEST"] == {"MIRROR": "default"} for replica in found.values())
    assert _replicas("", PRIMARY) == {} and _replicas(" , ", PRIMARY) == {}


def test_without_replicas_every_read_is_the_primarys_and_nothing_watches():
    assert settings.DATABASE_ROUTERS == []
    assert replicas.configured() == ()
    assert replicas.replica() is None
    assert replicas.reading() == DEFAULT_DB_ALIAS
    on_replica_called = []

    def on_replica() -> str:
        on_replica_called.append(True)
        return "replica"

    assert replicas.public_read(on_replica, lambda: "primary") == "primary"
    assert not on_replica_called
    assert "cairn-replica-watch" not in {thread.name for thread in threading.enumerate()}
