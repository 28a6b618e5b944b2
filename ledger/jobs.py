"""The sequencer as a django-q2 job (SPEC §15.3). Schedules run too seldom for the log's
integration promise, so a committed write nudges a worker, at most once per interval per process;
the job integrates, waits one interval and integrates again (taking in the writes whose nudge was
skipped), then asks the witnesses to cosign. A schedule every minute catches a lost nudge."""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django_q.tasks import async_task

from ledger.services import log_sequence
from ledger.witnesses import witnesses_cosign

logger = logging.getLogger(__name__)
_last_nudge = 0.0


def sequence_log() -> int:
    appended = log_sequence()
    time.sleep(settings.CAIRN_LOG_INTERVAL_S)
    appended += log_sequence()
    witnesses_cosign()
    return appended


def sequencing_nudge() -> None:
    global _last_nudge
    now = time.monotonic()
    if now - _last_nudge < settings.CAIRN_LOG_INTERVAL_S:
        return
    _last_nudge = now
    try:
        async_task("ledger.jobs.sequence_log")
    except Exception:  # the write has committed; the minute's schedule will integrate its entry
        logger.warning("could not queue the log sequencer; the schedule will run it", exc_info=True)
