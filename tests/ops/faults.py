"""Jobs that fault the worker running them, for the tests of operations. A cluster runs them by
dotted path, as it runs Cairn's own jobs."""

from __future__ import annotations

import inspect
import os
import signal
from pathlib import Path


def die_holding_the_timer_lock(mark: str) -> None:
    """SIGKILL the worker running this job while it holds its timer lock, the instant a kill
    right after a job can find it in (django-q2's worker takes the lock to hand in the job's
    result). Once per `mark`, a file: the ORM broker hands a job whose worker died out again."""
    once = Path(mark)
    if once.exists():
        return
    once.touch()
    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    frame.f_back.f_locals["timer"].get_lock().acquire()  # the worker's frame: the job's caller
    os.kill(os.getpid(), signal.SIGKILL)
