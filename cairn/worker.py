"""The worker's sentinel, made to survive the sudden death of one of its processes (SPEC §16).

A django-q2 cluster's workers share one in-memory task queue, and the worker waiting in `get()`
holds that queue's read lock. If it is killed there (SIGKILL, the OOM killer), the lock dies with
it: the other workers and its replacement wait on the lock forever, while the pusher keeps taking
jobs from the broker for a cluster that will never run them. The monitor holds the result queue's
lock the same way. So when a worker or the monitor dies unasked, the sentinel ends the cluster's
processes and starts them anew around fresh queues. Jobs they held are handed out again by the
broker (the ORM broker after `retry`), and the sweep evaluates any task whose job was lost.

A sentinel may also start while the database is down (everything restarted at once, a worker
replaced in an outage): django-q2's ORM broker opens a connection the moment it is made, and a
sentinel that fails there ends the whole `qcluster`. So it waits for the database first. Its
cluster's first job is then the sweep, so what fell due while no worker ran is evaluated at once
rather than when django-q2 first looks at its schedules, 30 s after it starts.
"""

from __future__ import annotations

import logging
import signal
from multiprocessing import Event

from django.db import connection
from django_q.brokers import Broker, get_broker
from django_q.cluster import Sentinel
from django_q.queues import Queue
from django_q.tasks import async_task

from core.outages import is_outage, through_outages

logger = logging.getLogger(__name__)

# django-q2 marks a worker's timer 0 when it timed out and -2 when it was recycled on purpose.
_TIMED_OUT, _RECYCLED = 0, -2
# How often a sentinel waiting for the database tries again.
_RETRY_S = 1.0


def _broker_once_the_database_answers(stop_event) -> Broker | None:
    """The cluster's broker, made once the database answers; None if the cluster was told to stop
    first."""

    def broker() -> Broker:
        connection.ensure_connection()
        return get_broker()

    try:
        return through_outages(
            broker, pause=lambda: not stop_event.wait(_RETRY_S), who="the starting cluster"
        )
    except Exception as exc:
        if not is_outage(exc):
            raise
        return None


def _sweep_first(broker: Broker) -> None:
    try:
        async_task("tasks.jobs.evaluate_due", broker=broker, task_name="sweep on start")
    except Exception as exc:
        if not is_outage(exc):
            raise
        logger.warning("no sweep on start, the database is unavailable: the schedule will run it")


class QueueRenewingSentinel(Sentinel):
    def __init__(self, stop_event, start_event, cluster_id, broker=None, timeout=None, start=True):
        # The signals django-q2's sentinel sets first, so a SIGTERM while it waits ends it too.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        broker = broker or _broker_once_the_database_answers(stop_event)
        if broker is None:
            return
        _sweep_first(broker)
        super().__init__(stop_event, start_event, cluster_id, broker, timeout, start)

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
