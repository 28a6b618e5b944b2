"""`manage.py qcluster`: django-q2's command, with a sentinel that survives a killed worker
(cairn/worker.py), and a sweep as it starts. It takes the place of django-q2's own because
`cairn` comes first in INSTALLED_APPS."""

import logging

from django_q import cluster
from django_q.management.commands.qcluster import Command as DjangoQCommand

from cairn.worker import QueueRenewingSentinel
from core.outages import is_outage
from tasks.evaluation import tasks_evaluate_due

logger = logging.getLogger(__name__)


class Command(DjangoQCommand):
    def handle(self, *args, **options):
        # A worker that comes back after a crash or a deploy evaluates what fell due meanwhile at
        # once: django-q2 looks at its schedules only 30 s after it starts.
        try:
            logger.info("evaluated %d overdue tasks on start", tasks_evaluate_due())
        except Exception as exc:
            if not is_outage(exc):
                raise
            logger.warning(
                "no sweep on start, the database is unavailable: the schedule will run it"
            )
        # django-q2 starts `cluster.Sentinel` by name; this process runs the cluster and nothing else.
        cluster.Sentinel = QueueRenewingSentinel
        super().handle(*args, **options)
