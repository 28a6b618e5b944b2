"""Benchmark fixtures: fill a freshly migrated Cairn database fast, with rows shaped exactly as the
services write them (task, contribution, operation record, audit entry, django-q schedule).

This is a fixture, not app code: it uses bulk_create instead of the services so that 100,000 tasks
take seconds, not hours. Run with the project's venv and DATABASE_URL set, e.g.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cairn_bench_pg_1k \\
        .venv/bin/python bench/seed.py reads --tasks 1000 --out bench/var/pg_1k

Profiles:
  reads  N tasks: half evaluated (completed with 3 contributions, or failed with 1, published in the
         evaluation), half open (2 sealed contributions each, deadline ahead). Writes task_ids.txt (shuffled) to --out.
  writes N open tasks taking 10 contributions each, 200 contributor agents, and the request files
         for the SendMessage workload: cairn_contributions.txt ("<token>\\t<JSON-RPC body>" a line,
         every line a fresh valid contribution) and sdk_messages.txt (the same messages, no taskId).
  sweep  N open tasks already past their deadline (0..3 contributions each), for the sweep timing.
  log-state  the promises file a site keeps beside its keys once its log is signed and witnessed
         (`CAIRN_LOG_STATE`, `ledger.log_state`), which every card and every write reads.
  sdk    copy the tasks of this Cairn database into the a2a-sdk's DatabaseTaskStore table at
         --sdk-url (the same Task objects Cairn's A2A door answers, so both servers send the same bytes).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import random
import sys
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cairn.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management.color import no_style  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.db.models import Count  # noqa: E402
from django_q.models import Schedule  # noqa: E402

from a2a_gateway.models import TaskForm  # noqa: E402
from a2a_gateway.stored_forms import task_form  # noqa: E402
from agents.models import Agent, AuditEntry, Door, Operation  # noqa: E402
from agents.services import TOKEN_PREFIX, token_digest  # noqa: E402
from core.canonical import canonical_digest, fingerprint  # noqa: E402
from core.clock import format_instant, now_ms  # noqa: E402
from ledger import log_state  # noqa: E402
from ledger.keyper_seal import salt_new  # noqa: E402
from ledger.keys import receipt_sign  # noqa: E402
from ledger.models import Checkpoint  # noqa: E402
from ledger.notes import log_origin  # noqa: E402
from ledger.seal import report_seal  # noqa: E402
from tasks.changes import TaskChange  # noqa: E402
from tasks.counts import task_count_change  # noqa: E402
from tasks.evaluation import evaluation_apply  # noqa: E402
from tasks.models import Contribution, Task, TaskStatus  # noqa: E402
from tasks.rendered import task_render, task_view  # noqa: E402
from tasks.selectors import receipt_claims, receipt_view  # noqa: E402
from tasks.services import CONTRIBUTION_SUBMIT, TASK_POST  # noqa: E402

BATCH = 5000
SOURCES = [
    "https://github.com/a2aproject/a2a-js/blob/main/src/client/transports/json_rpc_transport.ts",
    "https://docs.python.org/3/library/json.html",
]
VERDICT_MIX = ["source_supported", "source_supported", "source_contradicted", "source_unclear"]


def bench_token(index: int) -> str:
    """Deterministic tokens, so the load files can carry them; only the SHA-256 is stored, as always."""
    return (
        f"{TOKEN_PREFIX}bench{index:06d}"
        + hashlib.sha256(f"bench-{index}".encode()).hexdigest()[:24]
    )


def make_agents(count: int, start: int = 0) -> list[tuple[Agent, str]]:
    address_hash = hmac.new(settings.SECRET_KEY.encode(), b"127.0.0.1", hashlib.sha256).hexdigest()
    now = now_ms()
    pairs = []
    for index in range(start, start + count):
        token = bench_token(index)
        agent = Agent(
            token_sha256=token_digest(token),
            label=f"bench agent {index}",
            address_hash=address_hash,
            created_at=now - timedelta(days=30),
        )
        pairs.append((agent, token))
    Agent.objects.bulk_create([agent for agent, _ in pairs], batch_size=BATCH)
    return pairs


def open_task_request(index: int, deadline: datetime, max_contributors: int) -> dict:
    return {
        "title": f"Bench task {index}: does the client send A2A-Version on every request?",
        "question": (
            f"Task {index}. Read the client transport source and say whether every request it sends "
            "carries the A2A-Version header, and where the value comes from."
        ),
        "sources": SOURCES,
        "acceptance_criteria": [
            "Names the function that sets the header",
            "Quotes the constant's value",
        ],
        "deadline": format_instant(deadline),
        "min_independent": 2,
        "max_contributors": max_contributors,
        "budget": {"currency": "USD", "amount": 0},
    }


def contribution_report(index: int, verdict: str) -> dict:
    return {
        "schema": "cairn.task.contribution/0.1",
        "verdict": verdict,
        "summary": f"Report {index}: the transport sets A2A-Version from A2A_PROTOCOL_VERSION ('1.0') on every call.",
        "conditions": ["Holds for @a2a-js/sdk 1.3.0"],
        "attempts": ["Read src/client/transports/json_rpc_transport.ts at tag v1.3.0"],
        "limitations": ["Did not check the gRPC transport"],
        "source_urls": [SOURCES[0]],
    }


def contribution_payload(report: dict) -> dict:
    approval = {
        "public_output_digest": digest(report),
        "public_output": True,
        "scope": "this_contribution",
    }
    return {**report, "approval": approval}


def _report_pool(size: int = 64) -> list[tuple[dict, str, dict]]:
    """(report, its digest, the payload that carried it): reports repeat across tasks (different agents
    may well write the same words); every digest is still exactly what the service would compute."""
    pool = []
    for index in range(size):
        report = contribution_report(index, VERDICT_MIX[index % len(VERDICT_MIX)])
        pool.append((report, digest(report), contribution_payload(report)))
    return pool


def _jcs(value) -> bytes:
    """RFC 8785 for the fixture's own values (ASCII-safe text, small ints, no floats), where it equals
    sorted-key compact JSON; spot-checked against rfc8785 so a drift would stop the seeding."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


_checked = 0


def digest(value) -> str:
    global _checked
    if _checked < 50:  # the first values go through the real implementation too
        _checked += 1
        assert "sha256:" + hashlib.sha256(_jcs(value)).hexdigest() == canonical_digest(value)
    return "sha256:" + hashlib.sha256(_jcs(value)).hexdigest()


def _row(obj) -> dict:
    return {field.attname: getattr(obj, field.attname) for field in type(obj)._meta.concrete_fields}


def insert_rows(model, rows: list[dict]) -> None:
    """Bulk insert: COPY on PostgreSQL, executemany on SQLite, each value prepared by its Django field."""
    if not rows:
        return
    fields = [field for field in model._meta.concrete_fields if field.attname in rows[0]]
    table = model._meta.db_table
    columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    prepared = (
        [field.get_db_prep_save(row[field.attname], connection) for field in fields] for row in rows
    )
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for values in prepared:
                    copy.write_row(values)
        else:
            marks = ", ".join(["%s"] * len(fields))
            cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", list(prepared))


class Writer:
    """Collects rows and writes them in batches, in foreign-key order."""

    def __init__(self) -> None:
        self.tasks: list[dict] = []
        self.forms: list[dict] = []
        self.contributions: list[dict] = []
        self.operations: list[dict] = []
        self.audit: list[dict] = []
        self.schedules: list[dict] = []
        self.counts = {
            "tasks": 0,
            "forms": 0,
            "contributions": 0,
            "operations": 0,
            "audit": 0,
            "schedules": 0,
        }
        self._next_ids = {}

    def _id(self, model) -> int:
        """Explicit ids for the auto-increment tables (the sequences are reset after seeding)."""
        if model not in self._next_ids:
            pk = model._meta.pk.attname
            last = model.objects.order_by(f"-{pk}").values_list(pk, flat=True).first() or 0
            self._next_ids[model] = last + 1
        value = self._next_ids[model]
        self._next_ids[model] = value + 1
        return value

    def record(
        self,
        agent: Agent,
        operation_id: str,
        kind: str,
        digest: str,
        result: dict,
        at: datetime,
        object_type: str,
        object_id: str,
    ) -> None:
        self.operations.append(
            {
                "id": self._id(Operation),
                "agent_id": agent.pk,
                "operation_id": operation_id,
                "kind": kind,
                "request_digest": digest,
                "result": result,
                "created_at": at,
            }
        )
        self.audit.append(
            {
                "id": self._id(AuditEntry),
                "at": at,
                "agent_id": agent.pk,
                "door": Door.A2A,
                "client": "",
                "operation": kind,
                "object_type": object_type,
                "object_id": object_id,
            }
        )

    def flush(self, force: bool = False) -> None:
        if not force and len(self.tasks) < BATCH:
            return
        with transaction.atomic():
            for model, rows in (
                (Task, self.tasks),
                (TaskForm, self.forms),
                (Contribution, self.contributions),
                (Operation, self.operations),
                (AuditEntry, self.audit),
                (Schedule, self.schedules),
            ):
                insert_rows(model, rows)
        for name, rows in (
            ("tasks", self.tasks),
            ("forms", self.forms),
            ("contributions", self.contributions),
            ("operations", self.operations),
            ("audit", self.audit),
            ("schedules", self.schedules),
        ):
            self.counts[name] += len(rows)
            rows.clear()

    def finish(self) -> None:
        self.flush(force=True)
        with connection.cursor() as cursor:  # point the sequences past the explicit ids
            for sql in connection.ops.sequence_reset_sql(
                no_style(), [Contribution, Operation, AuditEntry, Schedule]
            ):
                cursor.execute(sql)


REPORTS = _report_pool()


def add_task(
    writer: Writer,
    index: int,
    poster: Agent,
    contributors: list[Agent],
    *,
    created_at: datetime,
    deadline: datetime,
    max_contributors: int,
    n_contributions: int,
    evaluate: bool,
) -> Task:
    """One task as task_post + contribution_submit (+ task_evaluate) would leave it."""
    request = open_task_request(index, deadline, max_contributors)
    payload = {
        "schema": "cairn.open_task/0.1",
        "request": request,
        "approval": {
            "public_input_digest": digest(request),
            "public_output": True,
            "scope": "this_open_task",
        },
    }
    task = Task(
        id=uuid.uuid4(),
        poster=poster,
        title=request["title"],
        question=request["question"],
        sources=request["sources"],
        acceptance_criteria=request["acceptance_criteria"],
        deadline_text=request["deadline"],
        deadline=deadline,
        min_independent=2,
        max_contributors=max_contributors,
        budget=request["budget"],
        public_input_digest=payload["approval"]["public_input_digest"],
        created_at=created_at,
        status=TaskStatus.WORKING,
        status_timestamp=created_at,
        contributions_count=0,
    )
    writer.record(
        poster,
        str(uuid.uuid4()),
        TASK_POST,
        fingerprint(payload),
        {"task": task_view(task)},
        created_at,
        "task",
        str(task.id),
    )
    if not evaluate:
        writer.schedules.append(
            {
                "id": writer._id(Schedule),
                "name": f"evaluate {task.id}",
                "func": "tasks.jobs.evaluate_task",
                "hook": None,
                "args": repr((str(task.id),)),
                "kwargs": "{}",
                "schedule_type": Schedule.ONCE,
                "minutes": None,
                "repeats": 1,
                "next_run": deadline,
                "cron": None,
                "task": None,
                "cluster": None,
                "intended_date_kwarg": None,
            }
        )
    contributions = []
    for k in range(n_contributions):
        agent = contributors[(index + k) % len(contributors)]
        report, report_digest, payload_fingerprint = REPORTS[(index * 3 + k) % len(REPORTS)]
        received_at = created_at + timedelta(minutes=1 + k)
        operation_id = str(uuid.uuid4())
        contribution = SimpleNamespace(
            seq=writer._id(Contribution),
            id=uuid.uuid4(),
            task=task,
            task_id=task.id,
            agent_id=agent.pk,
            operation_id=operation_id,
            sealed_report=None,
            report_digest=report_digest,
            salt=salt_new(),
            received_at=received_at,
            keyper_seal=None,
            releases=[],
        )
        contribution.sealed_report = report_seal(
            report, task_id=task.id, contribution_id=contribution.id
        )
        contribution.receipt_signature = receipt_sign(receipt_claims(contribution))
        task.contributions_count += 1
        body = {"task": task_view(task), "receipt": receipt_view(contribution)}
        request_digest = fingerprint({"task_id": str(task.id), "payload": payload_fingerprint})
        writer.record(
            agent,
            operation_id,
            CONTRIBUTION_SUBMIT,
            request_digest,
            body,
            received_at,
            "contribution",
            str(contribution.id),
        )
        writer.contributions.append(
            {
                name: getattr(contribution, name)
                for name in (
                    "seq",
                    "id",
                    "task_id",
                    "agent_id",
                    "operation_id",
                    "sealed_report",
                    "report_digest",
                    "salt",
                    "received_at",
                    "receipt_signature",
                    "keyper_seal",
                    "releases",
                )
            }
        )
        contributions.append(contribution)
    if evaluate:
        change = evaluation_apply(task, contributions, evaluated_at=deadline + timedelta(seconds=2))
    else:
        change = TaskChange(task, task_render(task))
    writer.tasks.append(_row(task))
    writer.forms.append(_row(task_form(change)))
    return task


def _ms(moment: datetime) -> datetime:
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def seed_reads(count: int, out: Path) -> None:
    rng = random.Random(7)
    (poster, _), *contributors = make_agents(51)
    contributor_agents = [agent for agent, _ in contributors]
    writer = Writer()
    now = now_ms()
    ids = []
    for index in range(count):
        # Evaluated and open tasks alternate at every depth of a ListTasks walk (newest status
        # first), so a page holds the same mix at 1,000 tasks as at 100,000 and a first page the
        # same as a deep one: both kinds change state within the last 24 h.
        if index % 2 == 0:  # evaluated: created 1..2 days ago, deadline a day later
            created = _ms(now - timedelta(days=1, seconds=2 + rng.randrange(86400 - 2)))
            task = add_task(
                writer,
                index,
                poster,
                contributor_agents,
                created_at=created,
                deadline=created + timedelta(days=1),
                max_contributors=3,
                n_contributions=3 if index % 4 == 0 else 1,
                evaluate=True,
            )
        else:  # open: created within the last 24 h, deadline 6 days after creation (always ahead)
            created = _ms(now - timedelta(seconds=rng.randrange(86400)))
            task = add_task(
                writer,
                index,
                poster,
                contributor_agents,
                created_at=created,
                deadline=created + timedelta(days=6),
                max_contributors=3,
                n_contributions=2,
                evaluate=False,
            )
        ids.append(str(task.id))
        writer.flush()
    writer.finish()
    rng.shuffle(ids)
    out.mkdir(parents=True, exist_ok=True)
    (out / "task_ids.txt").write_text("\n".join(ids) + "\n")
    print(json.dumps({"profile": "reads", **writer.counts}))


def seed_writes(count: int, out: Path, contributors_count: int = 200, per_task: int = 10) -> None:
    (poster, _), *pairs = make_agents(contributors_count + 1, start=1000)
    writer = Writer()
    now = now_ms()
    tasks = []
    for index in range(count):
        created = now - timedelta(minutes=5)
        tasks.append(
            add_task(
                writer,
                index,
                poster,
                [],
                created_at=created,
                deadline=created + timedelta(days=6),
                max_contributors=per_task,
                n_contributions=0,
                evaluate=False,
            )
        )
        writer.flush()
    writer.finish()
    groups = contributors_count // per_task
    out.mkdir(parents=True, exist_ok=True)
    with (
        open(out / "cairn_contributions.txt", "w") as cairn_file,
        open(out / "sdk_messages.txt", "w") as sdk_file,
    ):
        # Interleaved: consecutive requests go to different tasks and different agents, so no two
        # concurrent requests queue on the same row lock. Every (agent, task) pair appears once.
        for round_ in range(per_task):
            for t, task in enumerate(tasks):
                agent, token = pairs[(t % groups) * per_task + round_]
                payload = contribution_payload(
                    contribution_report(t * per_task + round_, VERDICT_MIX[round_ % 4])
                )
                message_id = str(uuid.uuid4())
                message = {
                    "messageId": message_id,
                    "role": "ROLE_USER",
                    "taskId": str(task.id),
                    "parts": [{"data": payload}],
                }
                body = {
                    "jsonrpc": "2.0",
                    "id": message_id,
                    "method": "SendMessage",
                    "params": {"message": message},
                }
                cairn_file.write(f"{token}\t{json.dumps(body, separators=(',', ':'))}\n")
                sdk_message = {
                    "messageId": message_id,
                    "role": "ROLE_USER",
                    "parts": [{"data": payload}],
                }
                sdk_body = {
                    "jsonrpc": "2.0",
                    "id": message_id,
                    "method": "SendMessage",
                    "params": {"message": sdk_message},
                }
                sdk_file.write(f"\t{json.dumps(sdk_body, separators=(',', ':'))}\n")
    print(
        json.dumps(
            {
                "profile": "writes",
                "payloads": count * per_task,
                "agents": contributors_count,
                **writer.counts,
            }
        )
    )


def seed_sweep(count: int) -> None:
    (poster, _), *contributors = make_agents(11, start=5000)
    contributor_agents = [agent for agent, _ in contributors]
    writer = Writer()
    now = now_ms()
    for index in range(count):
        created = now - timedelta(hours=2)
        add_task(
            writer,
            index,
            poster,
            contributor_agents,
            created_at=created,
            deadline=now - timedelta(minutes=1),
            max_contributors=3,
            n_contributions=index % 4,
            evaluate=False,
        )
        writer.flush()
    writer.finish()
    print(json.dumps({"profile": "sweep", **writer.counts}))


def seed_log_state(witnesses: int = 3, size: int = 100_000) -> None:
    """One log of `size` entries: the checkpoint the site signed, the trees its witnesses hold,
    and the checkpoint with their cosignatures, as the sequencer keeps them. The signatures are
    random bytes of about a real one's length: only the file's size and shape matter to its
    readers."""
    Path(settings.CAIRN_LOG_STATE).unlink(missing_ok=True)
    identity = hashlib.sha256(b"the bench's log").hexdigest()
    root = hashlib.sha256(b"its root").digest()
    origin = log_origin()

    def signed_by(name: str) -> str:
        return f"\u2014 {name} {base64.b64encode(os.urandom(72)).decode()}\n"

    note = f"{origin}\n{size}\n{base64.b64encode(root).decode()}\n\n" + signed_by(origin)
    names = [f"witness{i}.example/w{i}" for i in range(1, witnesses + 1)]
    log_state.signed_kept(identity, Checkpoint(tree_size=size, root_hash=root.hex(), note=note))
    for name in names:
        log_state.witness_kept(identity, name, size, root.hex())
    log_state.witnessed_kept(identity, size, root.hex(), note + "".join(map(signed_by, names)))


def seed_sdk(sdk_url: str) -> None:
    """The SDK store's rows for the same tasks: `DatabaseTaskStore._to_orm` of the Task Cairn answers."""
    import psycopg
    from a2a.server.models import Base, TaskModel
    from google.protobuf.json_format import MessageToDict
    from psycopg.types.json import Json
    from sqlalchemy import create_engine

    from a2a_gateway.translate import task_from_view

    engine = create_engine(sdk_url.replace("postgres://", "postgresql+psycopg://", 1))
    Base.metadata.create_all(engine, tables=[TaskModel.__table__])
    engine.dispose()
    total = 0
    with psycopg.connect(sdk_url) as sdk, sdk.cursor() as cursor:
        with cursor.copy(
            "COPY tasks (id, context_id, kind, owner, last_updated, status, artifacts, history, "
            "protocol_version, metadata) FROM STDIN"
        ) as copy:
            for task in Task.objects.order_by("pk").iterator(chunk_size=2000):
                proto = task_from_view(task_view(task))
                copy.write_row(
                    (
                        proto.id,
                        proto.context_id,
                        "task",
                        "",
                        proto.status.timestamp.ToDatetime(),
                        Json(MessageToDict(proto.status)),
                        Json([MessageToDict(artifact) for artifact in proto.artifacts]),
                        Json([]),
                        "1.0",
                        Json(MessageToDict(proto.metadata)),
                    )
                )
                total += 1
        sdk.commit()
        sdk.autocommit = True
        cursor.execute("VACUUM ANALYZE tasks")
    print(json.dumps({"profile": "sdk", "tasks": total}))


def count_tasks() -> None:
    """The per-status counts the services keep as they write, for the rows written in bulk here."""
    counted = Task.objects.order_by().values("status").annotate(n=Count("pk"))
    with transaction.atomic():
        task_count_change({row["status"]: row["n"] for row in counted})


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("profile", choices=["reads", "writes", "sweep", "log-state", "sdk"])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "var")
    parser.add_argument("--sdk-url", default="")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.profile == "reads":
        seed_reads(args.tasks, args.out)
    elif args.profile == "writes":
        seed_writes(args.tasks, args.out)
    elif args.profile == "sweep":
        seed_sweep(args.tasks)
    elif args.profile == "log-state":
        seed_log_state()
        return
    else:
        seed_sdk(args.sdk_url)
    if args.profile != "sdk":
        count_tasks()
    if (
        connection.vendor == "postgresql"
    ):  # what autovacuum does to a live database: statistics, visibility map
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    print(f"seeded in {time.perf_counter() - started:.1f}s", file=sys.stderr)


if __name__ == "__main__":
    main()
