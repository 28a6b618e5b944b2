"""The worker's sentinel and master: made to survive the sudden death of any of its processes and
to stop within 10 s of SIGTERM (SPEC §16).

django-q2's processes share multiprocessing queues and locks, and one killed while it holds one
leaves it held for good. So when any process dies unasked, the sentinel starts the cluster's
processes anew around fresh queues and queues a sweep first; the broker hands their jobs out again.

On SIGTERM to the process group django-q2's master blocks for good in `multiprocessing.Event.set()`,
whose Condition still counts the dead as sleepers, so only the master here reacts to SIGTERM and
SIGINT, by raising a `ProcessFlag`. The sentinel stops each process with a deadline and SIGKILLs
any past it: each job commits in its own transactions and may run any number of times (tasks/jobs.py).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing.queues
import os
import queue
import select
import signal
import time
import uuid
from multiprocessing import current_process
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess

from django.db import connection
from django_q.brokers import Broker, get_broker
from django_q.cluster import Sentinel, get_mp_context
from django_q.conf import Conf
from django_q.humanhash import humanize
from django_q.scheduler import scheduler
from django_q.status import Stat
from django_q.tasks import async_task

from core.outages import OUTAGES, through_outages

logger = logging.getLogger(__name__)

# django-q2 marks a worker's timer 0 when it timed out and -2 when it was recycled on purpose.
_TIMED_OUT, _RECYCLED = 0, -2
# The sentinel's stop, counted from the request: the pusher has 2 s to stop taking jobs (the ORM
# broker polls every 0.5 s, Redis blocks 1 s), the workers have until 6 s to finish the jobs in
# hand, the monitor until 7 s to save their results. Within SPEC §16's 10 s, with room to exit.
_PUSHER_S, _WORKERS_S, _MONITOR_S = 2.0, 6.0, 7.0
# After SIGKILL a process is gone at once, unless it is in the kernel's uninterruptible sleep.
_REAP_S = 1.0
_SCHEDULER_EVERY_S = 30.0


class ProcessFlag:
    """A flag forked processes inherit, raised by writing a byte to a pipe: unlike
    `multiprocessing.Event` it holds no lock a dead process may keep, and a signal handler may
    raise it, since that never blocks."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)

    def fileno(self) -> int:
        return self._read

    def set(self) -> None:
        with contextlib.suppress(BlockingIOError):  # a full pipe: the flag is up already
            os.write(self._write, b"!")

    def is_set(self) -> bool:
        return self.wait(0)

    def wait(self, timeout: float | None = None) -> bool:
        readable, _, _ = select.select([self._read], [], [], timeout)
        return bool(readable)


def _ignore_stop_signals() -> None:
    """Leave SIGTERM and SIGINT to the master; the processes a sentinel forks inherit this."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _end(processes: list[BaseProcess], by: float) -> None:
    """Wait until `by` (a monotonic time) for the processes to exit, then end the rest."""
    for process in processes:
        process.join(timeout=max(0.0, by - time.monotonic()))
    for process in processes:
        if process.is_alive():
            logger.warning("%s did not stop in time: ending it", process.name)
            process.kill()
            process.join(timeout=_REAP_S)


def _broker_once_the_database_answers(stop_event) -> Broker | None:
    """The cluster's broker, made once the database answers (the ORM broker connects at once, and
    a failure there would end `qcluster`); None if the cluster was told to stop first."""

    def broker() -> Broker:
        connection.ensure_connection()
        return get_broker()

    try:
        return through_outages(
            broker, pause=lambda: not stop_event.wait(1.0), who="the starting cluster"
        )
    except OUTAGES:
        return None


def _queues() -> tuple[multiprocessing.queues.Queue, multiprocessing.queues.Queue]:
    """multiprocessing's own task and result queues, whose size and emptiness are read without a
    lock (django-q2's are not)."""
    context = get_mp_context()
    return context.Queue(maxsize=Conf.QUEUE_LIMIT or 0), context.Queue()


def _timer(worker: BaseProcess) -> float:
    """A worker's timer, read without its lock: call when the worker is dead or the guard holds
    the lock."""
    return worker.timer.get_obj().value  # type: ignore[attr-defined]


def _sweep_first(broker: Broker, *, on: str) -> None:
    """Queue a sweep as a new generation's first job; failing that, the schedule runs one."""
    try:
        async_task("tasks.jobs.evaluate_due", broker=broker, task_name=f"sweep on {on}")
    except OUTAGES:
        logger.warning("no sweep on %s, the database is unavailable: the schedule will run it", on)
    except Exception:
        logger.exception("no sweep on %s: the schedule will run it", on)


class QueueRenewingSentinel(Sentinel):
    pool: list[BaseProcess]
    task_queue: multiprocessing.queues.Queue
    result_queue: multiprocessing.queues.Queue

    def __init__(self, stop_event, start_event, cluster_id):
        _ignore_stop_signals()
        broker = _broker_once_the_database_answers(stop_event)
        if broker is None:
            return
        _sweep_first(broker, on="start")
        super().__init__(stop_event, start_event, cluster_id, broker, start=False)
        _ignore_stop_signals()  # django-q2's sentinel gave SIGTERM its default action back
        self.task_queue, self.result_queue = _queues()
        self.event_out = ProcessFlag()  # the pusher's stop flag: a pusher may be killed too
        self.start()

    def guard(self) -> None:
        """django-q2's guard loop waits on each worker's timer lock, which a worker killed as it
        hands in a result leaves held, and then nothing is replaced or scheduled. This one waits on
        no lock a dead process may hold and runs the scheduler every 30 s of the clock (SPEC §4.3:
        evaluated within a minute)."""
        cluster = f"{humanize(self.cluster_id.hex)} [{self.queue_name()}]"
        logger.info("%s guarding cluster %s", current_process().name, cluster)
        self.start_event.set()
        Stat(self).save()
        logger.info("Q Cluster %s running.", cluster)
        cycle = Conf.GUARD_CYCLE
        schedule_at = time.monotonic() + _SCHEDULER_EVERY_S
        while True:
            for worker in list(self.pool):
                self._guard_worker(worker, cycle)
            for process in (self.monitor, self.pusher):
                if not process.is_alive():
                    self.reincarnate(process)
            if Conf.SCHEDULER and time.monotonic() >= schedule_at:
                schedule_at = time.monotonic() + _SCHEDULER_EVERY_S
                scheduler(broker=self.broker)
            Stat(self).save()
            if self.stop_event.wait(cycle):
                break
        self.stop()

    def _guard_worker(self, worker: BaseProcess, cycle: float) -> None:
        """Replace a worker that is dead or out of time, else count its job's time down."""
        if worker not in self.pool:
            return  # a worker of the generation a renewal this cycle replaced
        if not worker.is_alive():
            self.reincarnate(worker)
            return
        lock = worker.timer.get_lock()  # type: ignore[attr-defined]
        if not lock.acquire(timeout=cycle):
            return  # held longer than a worker ever holds it: its worker died, as the next cycle sees
        try:
            if _timer(worker) == _TIMED_OUT or not worker.is_alive():
                self.reincarnate(worker)
            elif _timer(worker) > 0:
                worker.timer.get_obj().value -= cycle  # type: ignore[attr-defined]
        finally:
            lock.release()

    def stop(self) -> None:
        """django-q2's order (the pusher, the workers, the monitor), each ended past its deadline."""
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
        """Replace a worker that ended itself cleanly alone; for any other end of any process,
        start the cluster's processes anew."""
        if process not in self.pool and process not in (self.monitor, self.pusher):
            return  # a process of the generation already replaced
        if process in self.pool and _timer(process) in (_TIMED_OUT, _RECYCLED):
            process.join(timeout=_REAP_S)  # one that timed out itself is on its way out
            if process.exitcode == 0:
                super().reincarnate(process)
                return
        logger.critical(
            "cluster process %s %s: starting the cluster's processes anew",
            process.name,
            "ran past its job's time" if process.is_alive() else "died unasked",
        )
        generation = [*self.pool, self.monitor, self.pusher]
        for old in generation:
            if old.is_alive():
                old.kill()
        for old in generation:
            old.join(timeout=_REAP_S)
        self.task_queue, self.result_queue = _queues()
        self.event_out = ProcessFlag()
        _sweep_first(self.broker, on="renewal")
        self.spawn_cluster()
        self.reincarnations += 1


def run_cluster(*, once: bool) -> int:
    """The `qcluster` process in place of django-q2's `Cluster`, until asked to stop (or just
    started, with `once`); returns the sentinel's exit code."""
    cluster_id = uuid.uuid4()
    name = humanize(cluster_id.hex)
    stop_event, start_event = ProcessFlag(), ProcessFlag()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda signum, frame: stop_event.set())
    sentinel = get_mp_context().Process(
        target=QueueRenewingSentinel,
        name=f"Process-{uuid.uuid4().hex}",
        args=(stop_event, start_event, cluster_id),
    )
    sentinel.start()
    logger.info("Q Cluster %s starting.", name)
    if once:
        wait([sentinel.sentinel, start_event.fileno()])
        stop_event.set()
    wait([sentinel.sentinel, stop_event.fileno()])
    if stop_event.is_set():
        logger.info("Q Cluster %s stopping.", name)
    sentinel.join()
    _ignore_stop_signals()  # a later signal must not turn the exit status into a death by it
    logger.info("Q Cluster %s has stopped.", name)
    return sentinel.exitcode or 0
