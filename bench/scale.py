"""The A2A reads at 1,000 and at 1,000,000 tasks, in the same run: GetTask, the first
ListTasks page and the page 1,000 deep, each within 20% of its 1,000-task rate.

    BENCH_PG=postgres://postgres@127.0.0.1:5432 .venv/bin/python bench/scale.py setup
    BENCH_PG=postgres://postgres@127.0.0.1:5432 .venv/bin/python bench/scale.py run [--rounds 2]
    BENCH_PG=postgres://postgres@127.0.0.1:5432 .venv/bin/python bench/scale.py drop

`setup` seeds `cairn_bench_scale_1k` with `bench/seed.py reads` (1,000 tasks, every row as the
services write it), then makes `cairn_bench_scale_1m` a copy of it grown to 1,000,000 tasks in
one `INSERT ... SELECT` over `generate_series`: copy k of each task has its own id and every
instant it holds moved k × 5 minutes earlier, in the columns and inside the stored texts (the
A2A door's four forms, the view, the evaluation), so the copies are the forms the project's own
code wrote with other ids and times. Only the tables the reads use grow (the tasks, the door's
forms, the per-status counts); the million spans 3.5 days, so an open copy's deadline is still
a day and a half ahead when seeded (`setup` seeds again once one is less than an hour ahead).

`run` serves each database in turn with Cairn under uvicorn on core 0 and drives it from core 1
with wrk, as `bench/run.sh run` does (3 s warm-up, 10 s measured): GetTask over 1,000 ids (at
1,000,000, 1,000 drawn at random from all), the first page and the page 1,000 tasks deep, the
token found by walking 20 pages, as `list_deep` is everywhere in bench/. `--rounds` alternates
the sizes, so a load that comes and goes on a shared machine falls on both.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from datetime import UTC, datetime
from urllib.parse import quote

import psycopg

from bench import (  # bench/bench.py, beside this file
    RESULTS,
    VAR,
    BackendPinner,
    admin,
    cairn_server,
    db_exists,
    log,
    marker,
    measure,
    pg_start,
    pg_url,
    read_files,
    recreate_db,
    setup_cairn,
    summary,
    tree_state,
)

SMALL, LARGE = "cairn_bench_scale_1k", "cairn_bench_scale_1m"
COPIES = 1000
SHIFT_S = 300
WORKLOADS = ("get_task", "list_first", "list_deep")

# Each instant a task's texts hold, as the project writes them (`core.clock.format_instant`):
# its creation, its contributions' receipts (1, 2 and 3 minutes after it, as bench/seed.py
# places them), its deadline, and its status time (its evaluation, once evaluated).
MOVED = """
CREATE FUNCTION pg_temp.moved(body text, old uuid, new uuid, shift interval, instants timestamptz[])
RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    at timestamptz;
    i int := 0;
BEGIN
    IF body IS NULL THEN RETURN NULL; END IF;
    body := replace(body, old::text, new::text);
    -- Through placeholders first, so an instant moved onto another's old value is not moved twice.
    FOREACH at IN ARRAY instants LOOP
        i := i + 1;
        body := replace(body, to_char(at, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), chr(1) || i || chr(2));
    END LOOP;
    i := 0;
    FOREACH at IN ARRAY instants LOOP
        i := i + 1;
        body := replace(body, chr(1) || i || chr(2),
                        to_char(at - shift, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'));
    END LOOP;
    RETURN body;
END $$;
"""

GROW = """
CREATE TEMP TABLE copy AS
SELECT t.id AS old, md5(t.id::text || ':' || k)::uuid AS new,
       make_interval(secs => k * %(shift)s::int) AS shift,
       ARRAY[t.created_at, t.created_at + interval '1 minute', t.created_at + interval '2 minutes',
             t.created_at + interval '3 minutes', t.deadline, t.status_timestamp] AS instants
FROM tasks_task t, generate_series(1, %(copies)s::int - 1) AS k;

INSERT INTO tasks_task
SELECT c.new, t.title, t.question, t.sources, t.acceptance_criteria,
       pg_temp.moved(t.deadline_text, c.old, c.new, c.shift, c.instants),
       t.deadline - c.shift, t.min_independent, t.max_contributors, t.budget,
       t.public_input_digest, t.created_at - c.shift, t.status, t.status_timestamp - c.shift,
       t.contributions_count, t.outcome, t.verdict, t.evaluated_at - c.shift,
       pg_temp.moved(t.evaluation::text, c.old, c.new, c.shift, c.instants)::jsonb,
       t.poster_id, t.rendered_version,
       pg_temp.moved(t.view_json, c.old, c.new, c.shift, c.instants), t.keys_pending
FROM copy c JOIN tasks_task t ON t.id = c.old;

INSERT INTO a2a_gateway_taskform
SELECT c.new, f.status, f.status_timestamp - c.shift, f.deadline - c.shift,
       pg_temp.moved(f.task_json, c.old, c.new, c.shift, c.instants),
       pg_temp.moved(f.list_item_json, c.old, c.new, c.shift, c.instants),
       pg_temp.moved(f.list_item_full_json, c.old, c.new, c.shift, c.instants),
       pg_temp.moved(f.task_v0_3_json, c.old, c.new, c.shift, c.instants), f.keys_pending
FROM copy c JOIN a2a_gateway_taskform f ON f.task_id = c.old;

UPDATE tasks_taskcount SET count = count * %(copies)s::int
"""


def columns_match(conn: psycopg.Connection) -> None:
    """GROW names the two tables' columns by position: stop if a migration has changed them."""
    expected = {
        "tasks_task": "id title question sources acceptance_criteria deadline_text deadline "
        "min_independent max_contributors budget public_input_digest created_at status "
        "status_timestamp contributions_count outcome verdict evaluated_at evaluation poster_id "
        "rendered_version view_json keys_pending",
        "a2a_gateway_taskform": "task_id status status_timestamp deadline task_json "
        "list_item_json list_item_full_json task_v0_3_json keys_pending",
    }
    for table, names in expected.items():
        found = conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
            "ORDER BY ordinal_position",
            (table,),
        ).fetchall()
        if [row[0] for row in found] != names.split():
            sys.exit(f"{table}'s columns changed: update GROW in bench/scale.py")


def fresh(db: str) -> bool:
    """Seeded, and no open task's deadline within the hour (a read would evaluate it first)."""
    if not db_exists(db):
        return False
    with psycopg.connect(pg_url(db)) as conn:
        row = conn.execute(
            "SELECT count(*), min(deadline) FILTER (WHERE status = 'working') FROM tasks_task"
        ).fetchone()
    return row[0] == COPIES * 1000 and row[1].timestamp() > datetime.now(UTC).timestamp() + 3600


def setup(args: argparse.Namespace) -> None:
    pg_start()
    if fresh(LARGE):
        log(f"{LARGE}: already seeded")
        return
    marker("scale_1k").unlink(missing_ok=True)  # its open tasks' deadlines set the large one's
    setup_cairn("scale_1k", pg_url(SMALL), "reads", 1000, True)
    recreate_db(LARGE, template=SMALL)
    started = datetime.now(UTC)
    with psycopg.connect(pg_url(LARGE)) as conn:
        columns_match(conn)
        conn.execute("SET timezone = 'UTC'")
        conn.execute(MOVED)
        for statement in GROW.split(";\n\n"):
            conn.execute(statement, {"copies": COPIES, "shift": SHIFT_S})
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE")
        size = conn.execute("SELECT pg_size_pretty(pg_database_size(current_database()))")
        log(
            f"{LARGE}: {COPIES * 1000:,} tasks in {(datetime.now(UTC) - started).seconds} s, "
            f"{size.fetchone()[0]}"
        )
    with psycopg.connect(pg_url(LARGE)) as conn:
        ids = [row[0] for row in conn.execute("SELECT task_id::text FROM a2a_gateway_taskform")]
    random.Random(37).shuffle(ids)
    (VAR / "scale_1m").mkdir(parents=True, exist_ok=True)
    (VAR / "scale_1m" / "task_ids.txt").write_text("\n".join(ids[:1000]) + "\n")


def run(args: argparse.Namespace) -> None:
    pg_start()
    if not fresh(LARGE):
        sys.exit(f"{LARGE} is missing or stale: run `bench/scale.py setup` first")
    results: dict = {"load": [], "runs": [], "tree": tree_state(), "pg_options": args.pg_options}
    pinner = BackendPinner()
    pinner.start()
    try:
        for round_ in range(args.rounds):
            for label, db in (("1k", SMALL), ("1m", LARGE)):
                results["load"].append([label, round(os.getloadavg()[0], 2)])
                url = pg_url(db) + (f"?options={quote(args.pg_options)}" if args.pg_options else "")
                with cairn_server("uvicorn", url, "cairn.settings") as server:
                    ids = VAR / f"scale_{label}" / "task_ids.txt"
                    files = read_files(server.port, f"scale-{label}", ids)
                    for workload in WORKLOADS:
                        path, file = files[workload]
                        result = measure(
                            server.port, path, file, pinner=pinner, server_pids=server.worker_pids()
                        )
                        results["runs"].append(
                            {"round": round_, "size": label, "workload": workload, **result}
                        )
                        log(f"{label:3s} {workload:11s} {summary(result)}")
    finally:
        pinner.stop()
    print(ratios(results))
    out = RESULTS / f"scale-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    out.write_text(json.dumps(results, indent=1) + "\n")
    log(f"results: {out}")


def ratios(results: dict) -> str:
    """Each workload's rate at 1,000,000 against 1,000, summed over the rounds."""
    lines = ["| workload | 1,000 tasks | 1,000,000 | ratio |", "|---|---:|---:|---:|"]
    for workload in WORKLOADS:
        rate = {}
        for size in ("1k", "1m"):
            runs = [r for r in results["runs"] if (r["size"], r["workload"]) == (size, workload)]
            rate[size] = sum(r["requests"] for r in runs) / sum(r["seconds"] for r in runs)
        lines.append(
            f"| {workload} | {rate['1k']:,.0f} req/s | {rate['1m']:,.0f} | "
            f"{rate['1m'] / rate['1k']:.2f} |"
        )
    return "\n".join(lines)


def drop(args: argparse.Namespace) -> None:
    for db in (LARGE, SMALL):
        admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    marker("scale_1k").unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("setup").set_defaults(func=setup)
    run_parser = sub.add_parser("run")
    run_parser.add_argument("--rounds", type=int, default=2)
    run_parser.add_argument(
        "--pg-options", default="", help="the server's session settings, e.g. '-c jit=off'"
    )
    run_parser.set_defaults(func=run)
    sub.add_parser("drop").set_defaults(func=drop)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
