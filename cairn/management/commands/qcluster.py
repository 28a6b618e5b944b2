"""`manage.py qcluster`: django-q2's command, with a sentinel that waits for the database, sweeps
first and survives a killed worker (cairn/worker.py). It takes the place of django-q2's own because
`cairn` comes first in INSTALLED_APPS."""

from django_q import cluster
from django_q.management.commands.qcluster import Command as DjangoQCommand

from cairn.worker import QueueRenewingSentinel


class Command(DjangoQCommand):
    def handle(self, *args, **options):
        # django-q2 starts `cluster.Sentinel` by name; this process runs the cluster and nothing else.
        cluster.Sentinel = QueueRenewingSentinel
        super().handle(*args, **options)
