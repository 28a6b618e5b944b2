"""Time the evaluation sweep: the worker's periodic job `tasks.jobs.evaluate_due` (= tasks_evaluate_due())
over a database seeded with N overdue tasks (`bench/seed.py sweep`). Prints one JSON line.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cairn_bench_sweep taskset -c 0 .venv/bin/python bench/sweep.py
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

# The checkout whose code is timed: BENCH_SERVE_TREE's when set (bench.py runs this file from its
# own checkout), else this one's. Put first, so this checkout's packages cannot shadow it.
TREE = os.environ.get("BENCH_SERVE_TREE") or Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(TREE).resolve()))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cairn.settings")

import django  # noqa: E402

django.setup()

from django.db.models import Count  # noqa: E402
from django.utils import timezone  # noqa: E402

from tasks.jobs import evaluate_due  # noqa: E402
from tasks.models import Task, TaskStatus  # noqa: E402


def main() -> None:
    due = Task.objects.filter(status=TaskStatus.WORKING, deadline__lte=timezone.now()).count()
    started = time.perf_counter()
    evaluated = evaluate_due()
    seconds = time.perf_counter() - started
    left = Task.objects.filter(status=TaskStatus.WORKING, deadline__lte=timezone.now()).count()
    by_status = {
        row["status"]: row["n"] for row in Task.objects.values("status").annotate(n=Count("pk"))
    }
    print(
        json.dumps(
            {
                "due": due,
                "evaluated": evaluated,
                "left": left,
                "seconds": round(seconds, 3),
                "tasks_per_s": round(evaluated / seconds, 1) if seconds else None,
                "by_status": by_status,
            }
        )
    )


if __name__ == "__main__":
    main()
