"""The worker's sentinel and master: made to survive the sudden death of one of its processes and
to stop within 10 s of SIGTERM (SPEC §16).

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

Stopping (SPEC §16: within 10 s of SIGTERM, however it is sent). django-q2's own master waits in
a futex forever when SIGTERM reaches the whole process group, as `kill -- -PGID`, systemd's cgroup
kill and `make run`'s shell send it, because:

- Every process of the cluster gets the signal, not only the master. The sentinel and its workers
  keep SIGTERM's default action and die where they stand: the sentinel inside
  `stop_event.wait()`, a worker inside `task_queue.get()` holding the queue's read lock.
- A `multiprocessing.Event` is a Condition. A process that dies while waiting on it stays counted
  as a sleeper, and `set()` then waits for that sleeper to acknowledge its wake-up, which it never
  will. The master's signal handler calls `set()`, so it blocks there with SIGTERM spent; a
  second signal can only re-enter the handler and wait on the Condition's lock it already holds.
- Were the master to go on, `sentinel.join()`, the sentinel's loops over the pusher and the
  workers, and its queues' feeder threads at exit would all wait without a bound, for processes
  that are gone or for locks a killed process still holds.

So only the master reacts to SIGTERM and SIGINT: the sentinel and every process it starts ignore
both, and a signal to the group is one request to stop, not a massacre. The master's handler
only raises a `ProcessFlag`, a pipe, which no dead process can leave locked, and the sentinel's
stop gives each process a deadline: the pusher stops taking jobs, the workers finish the job in
hand, the monitor saves their results. A process past its deadline (a job longer than the
grace, a queue whose lock a killed process held) is ended with SIGKILL, the one signal the
cluster does not ignore. That is safe by the jobs' design: each job commits its work in its own
transactions and may run any number of times (tasks/jobs.py), so a job ended midway is left to
run again (the ORM broker hands it out again after `retry`, the sweep catches the rest), never
half-applied.
"""

from __future__ import annotations

import logging
import os
import queue
import select
import signal
import time
import uuid
from collections.abc import Iterable
from multiprocessing import current_process
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess

from django.db import connection
from django_q.brokers import Broker, get_broker
from django_q.cluster import Sentinel, get_mp_context
from django_q.humanhash import humanize
from django_q.queues import Queue
from django_q.status import Stat
from django_q.tasks import async_task

from core.outages import is_outage, through_outages

logger = logging.getLogger(__name__)

# django-q2 marks a worker's timer 0 when it timed out and -2 when it was recycled on purpose.
_TIMED_OUT, _RECYCLED = 0, -2
# How often a sentinel waiting for the database tries again.
_RETRY_S = 1.0
# The sentinel's stop, counted from the request: the pusher has 2 s to stop taking jobs (the ORM
# broker polls every 0.5 s, Redis blocks 1 s), the workers have until 6 s to finish the jobs in
# hand, the monitor until 7 s to save their results. Within SPEC §16's 10 s, with room to exit.
_PUSHER_S, _WORKERS_S, _MONITOR_S = 2.0, 6.0, 7.0
# After SIGKILL a process is gone at once, unless it is in the kernel's uninterruptible sleep.
_REAP_S = 1.0


class ProcessFlag:
    """A flag for the cluster's processes, which inherit it when they are forked: raised by writing
    a byte to a pipe, seen by polling the pipe. It takes the place of `multiprocessing.Event`,
    whose Condition a process killed while waiting on it leaves broken for good (the module's
    docstring): a pipe holds no lock and counts no sleepers, and raising it never blocks, so a
    signal handler may do it."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)

    def fileno(self) -> int:
        return self._read

    def set(self) -> None:
        if not self.is_set():
            try:
                os.write(self._write, b"!")
            except BlockingIOError:  # the pipe is full, so the flag is up already
                pass

    def is_set(self) -> bool:
        return self.wait(0)

    def wait(self, timeout: float | None = None) -> bool:
        readable, _, _ = select.select([self._read], [], [], timeout)
        return bool(readable)


def _ignore_stop_signals() -> None:
    """The cluster's processes leave SIGTERM and SIGINT to the master (the module's docstring);
    the processes a sentinel forks inherit this."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _end(processes: Iterable[BaseProcess], by: float) -> None:
    """Wait until `by` (a monotonic time) for the processes to exit, then end the rest."""
    processes = list(processes)
    for process in processes:
        process.join(timeout=max(0.0, by - time.monotonic()))
    for process in processes:
        if process.is_alive():
            logger.warning("%s did not stop in time: ending it", process.name)
            process.kill()
            process.join(timeout=_REAP_S)


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
    pool: list[BaseProcess]
    task_queue: Queue
    result_queue: Queue

    def __init__(self, stop_event, start_event, cluster_id, broker=None, timeout=None, start=True):
        _ignore_stop_signals()
        broker = broker or _broker_once_the_database_answers(stop_event)
        if broker is None:
            return
        _sweep_first(broker)
        super().__init__(stop_event, start_event, cluster_id, broker, timeout, start=False)
        _ignore_stop_signals()  # django-q2's sentinel gave SIGTERM its default action back
        self.event_out = ProcessFlag()  # the pusher's stop flag: a pusher may be killed too
        if start:
            self.start()

    def stop(self) -> None:
        """django-q2's order (the pusher, then the workers, then the monitor), each with its
        deadline, after which it is ended: the module's docstring says why."""
        asked = time.monotonic()
        Stat(self).save()
        logger.info("%s stopping cluster processes", current_process().name)
        self.event_out.set()
        _end([self.pusher], by=asked + _PUSHER_S)
        for _ in self.pool:
            try:  # a full task queue has room as soon as a worker takes a job
                self.task_queue.put("STOP", timeout=max(0.0, asked + _WORKERS_S - time.monotonic()))
            except queue.Full:
                break
        _end(self.pool, by=asked + _WORKERS_S)
        self.result_queue.put("STOP")
        _end([self.monitor], by=asked + _MONITOR_S)
        self.pool = []
        # What a killed process never read must not keep this one from exiting.
        for leftover in (self.task_queue, self.result_queue):
            leftover.cancel_join_thread()
            leftover.close()
        Stat(self).save()

    def reincarnate(self, process) -> None:
        if process not in self.pool and process not in (self.monitor, self.pusher):
            return  # a process of the generation already replaced
        died_unasked = process is self.monitor or (
            process in self.pool and int(process.timer.value) not in (_TIMED_OUT, _RECYCLED)
        )
        if not died_unasked:
            super().reincarnate(process)
            if process.is_alive():  # past its job's timeout: django-q2's SIGTERM is ignored here
                _end([process], by=time.monotonic() + _REAP_S)
            return
        logger.critical(
            "cluster process %s died unasked: starting the cluster's processes anew", process.name
        )
        generation = [*self.pool, self.monitor, self.pusher]
        for old in generation:
            if old.is_alive():
                old.kill()
        for old in generation:
            old.join(timeout=_REAP_S)
        self.task_queue = Queue()
        self.result_queue = Queue()
        self.event_out = ProcessFlag()
        self.spawn_cluster()
        self.reincarnations += 1


class Master:
    """The `qcluster` process: it starts the sentinel and, on SIGTERM or SIGINT, raises the stop
    flag and waits for the sentinel, whose stop is bounded (the module's docstring). It takes the
    place of django-q2's `Cluster`, whose signal handler stops the cluster itself and can block
    there for good."""

    def __init__(self) -> None:
        self.cluster_id = uuid.uuid4()
        self.name = humanize(self.cluster_id.hex)
        self.stop_event = ProcessFlag()
        self.start_event = ProcessFlag()
        signal.signal(signal.SIGTERM, self._stop_requested)
        signal.signal(signal.SIGINT, self._stop_requested)

    def _stop_requested(self, signum, frame) -> None:
        self.stop_event.set()

    def run(self, *, once: bool = False) -> int:
        """Run the cluster until it is asked to stop, or just started with `once`; the sentinel's
        exit code."""
        sentinel = get_mp_context().Process(
            target=QueueRenewingSentinel,
            name=f"Process-{uuid.uuid4().hex}",
            args=(self.stop_event, self.start_event, self.cluster_id),
        )
        sentinel.start()
        logger.info("Q Cluster %s starting.", self.name)
        if once:
            wait([sentinel.sentinel, self.start_event.fileno()])
            self.stop_event.set()
        wait([sentinel.sentinel, self.stop_event.fileno()])
        if self.stop_event.is_set():
            logger.info("Q Cluster %s stopping.", self.name)
        sentinel.join()
        _ignore_stop_signals()  # a later signal must not turn the exit status into a death by it
        logger.info("Q Cluster %s has stopped.", self.name)
        return sentinel.exitcode or 0
