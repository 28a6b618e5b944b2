"""pytest-xdist runs the suite in several worker processes at once (`make test`): what two tests
running side by side must not share is chosen per worker here. Ports are picked free, folders are
pytest's `tmp_path` (one tree per worker), and the test database is suffixed per worker by
pytest-django; the shared Redis server's numbered databases are not, so each worker takes its own."""

from __future__ import annotations

import os


def worker_number() -> int:
    """This worker's number (`gw3` is 3); 0 without xdist."""
    return int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))


def redis_url() -> str:
    """A database of the local Redis for this worker's brokers, one of 8 to 15 (up to eight
    workers never share one). The tests of one worker run one after another, and each empties it
    before a cluster starts on it."""
    return f"redis://127.0.0.1:6379/{8 + worker_number() % 8}"
