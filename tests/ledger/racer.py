"""One of two processes racing writes at the log: `python -m tests.ledger.racer <count> <prefix>`.

It posts `count` tasks from five threads, each task by a fresh agent, while a sixth thread runs
the sequencer until the writes are done. Its settings come from the environment, like a worker's.
"""

from __future__ import annotations

import os
import sys
import threading
import uuid

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cairn.settings")
django.setup()

from django.db import connection  # noqa: E402

from agents.models import Door  # noqa: E402
from agents.services import Caller, agent_register  # noqa: E402
from ledger.services import log_sequence  # noqa: E402
from tasks.services import task_post  # noqa: E402
from tests.factories import open_task_payload  # noqa: E402


def main(count: int, prefix: str) -> None:
    start = threading.Barrier(6)
    done = threading.Event()

    def write(lane: int) -> None:
        start.wait()
        for n in range(lane, count, 5):
            agent, _ = agent_register(label="racer", address=f"{prefix}.{n}")
            task_post(Caller(agent, str(uuid.uuid4()), Door.HTTP), payload=open_task_payload())
        connection.close()

    def sequence() -> None:
        start.wait()
        while not done.is_set():
            log_sequence(batch_size=3)
        connection.close()

    writers = [threading.Thread(target=write, args=(lane,)) for lane in range(5)]
    sequencer = threading.Thread(target=sequence)
    for thread in [*writers, sequencer]:
        thread.start()
    for thread in writers:
        thread.join()
    done.set()
    sequencer.join()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
