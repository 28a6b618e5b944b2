"""The worker's sentinel, made to survive the sudden death of one of its processes (SPEC §16).

A django-q2 cluster's workers share one in-memory task queue, and the worker waiting in `get()`
holds that queue's read lock. If it is killed there (SIGKILL, the OOM killer), the lock dies with
it: the other workers and its replacement wait on the lock forever, while the pusher keeps taking
jobs from the broker for a cluster that will never run them. The monitor holds the result queue's
lock the same way. So when a worker or the monitor dies unasked, the sentinel ends the cluster's
processes and starts them anew around fresh queues. Jobs they held are handed out again by the
broker (the ORM broker after `retry`), and the sweep evaluates any task whose job was lost.
"""

from __future__ import annotations

import logging
from multiprocessing import Event

from django_q.cluster import Sentinel
from django_q.queues import Queue

logger = logging.getLogger(__name__)

# django-q2 marks a worker's timer 0 when it timed out and -2 when it was recycled on purpose.
_TIMED_OUT, _RECYCLED = 0, -2


class QueueRenewingSentinel(Sentinel):
    def reincarnate(self, process) -> None:
        if process not in self.pool and process not in (self.monitor, self.pusher):
            return  # a process of the generation already replaced
        died_unasked = process is self.monitor or (
            process in self.pool and int(process.timer.value) not in (_TIMED_OUT, _RECYCLED)
        )
        if not died_unasked:
            super().reincarnate(process)
            return
        logger.critical(
            "cluster process %s died unasked: starting the cluster's processes anew", process.name
        )
        generation = [*self.pool, self.monitor, self.pusher]
        for old in generation:
            if old.is_alive():
                old.terminate()
        for old in generation:
            old.join(timeout=5)
        self.task_queue = Queue()
        self.result_queue = Queue()
        self.event_out = Event()
        self.spawn_cluster()
        self.reincarnations += 1
