"""`manage.py qcluster`: django-q2's command with cairn/worker.py's master and sentinel."""

import os

from django.core.management.base import CommandError
from django_q.management.commands.qcluster import Command as DjangoQCommand

from cairn.worker import run_cluster


class Command(DjangoQCommand):
    def handle(self, *args, **options):
        if options.get("cluster_name"):
            os.environ["Q_CLUSTER_NAME"] = options["cluster_name"]
        code = run_cluster(once=options["run_once"])
        if code:
            raise CommandError(f"the cluster's sentinel exited with code {code}")
