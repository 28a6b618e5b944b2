"""Rows are written one way (`core.statements`), and that way cannot leave a model's field out.

A field added to a model and forgotten in one INSERT would be written as nothing: the database's
default, or an error much later. So every builder of an INSERT refuses a statement that leaves a
field out, every service's rows are seen here to name every field, and no product module writes
rows any other way (read from the source with `ast`, as `test_layout` reads the imports).
"""

from __future__ import annotations

import ast
import re
import uuid
from collections import defaultdict
from pathlib import Path

import pytest
from django.apps import apps
from django.db import connection
from django.db.models import Field, Model
from django.test.utils import CaptureQueriesContext

from agents.models import Agent, AuditEntry, Door, Operation
from agents.services import Caller, agent_revoke
from calls.models import Call, CallResponse, CallStatus
from calls.services import call_answer, call_close, call_create, call_edit
from core import statements
from ledger.jobs import sequence_log
from ledger.models import (
    Checkpoint,
    Cosignature,
    CosignedCheckpoint,
    Leaf,
    Node,
    QueuedEntry,
    WitnessedLog,
)
from ledger.witness import add_checkpoint
from tasks.jobs import evaluate_due
from tasks.models import Contribution, Sweep, Task, TaskCount
from tests.core.test_call_answer import answer_payload
from tests.ledger.test_witness import Log, Witness, _pem

ROOT = Path(__file__).resolve().parents[2]
# Where rows could be written from: the core, the domain apps, the doors and the composition root.
PRODUCT = (
    "core",
    "agents",
    "tasks",
    "calls",
    "ledger",
    "a2a_gateway",
    "http_api",
    "mcp_door",
    "web",
    "keeper",
    "ops",
    "cairn",
)
STATEMENTS = ROOT / "core" / "statements.py"


def project_models() -> list[type[Model]]:
    return [model for model in apps.get_models() if model.__module__.split(".")[0] in PRODUCT]


def written_fields(model: type[Model]) -> list[Field]:
    """What an INSERT of the model must name: every concrete field but the auto-numbered key."""
    return [field for field in model._meta.concrete_fields if field is not model._meta.auto_field]


def model_id(model: type[Model]) -> str:
    return model._meta.label


# --- the builders ------------------------------------------------------------------------------


@pytest.mark.parametrize("model", project_models(), ids=model_id)
def test_every_builder_refuses_an_insert_of_any_model_that_leaves_any_field_out(model):
    fields = written_fields(model)
    assert fields, model
    every = {field.attname: None for field in fields}
    statements.inserted(model, every)
    statements.rows_inserted(model, list(every), [list(every.values())])
    statements.rows_upserted(model, list(every), [list(every.values())])

    for field in fields:
        without = {name: value for name, value in every.items() if name != field.attname}
        with pytest.raises(statements.FieldLeftOut, match=rf"leaves out {field.name}\b"):
            statements.inserted(model, without)
        with pytest.raises(statements.FieldLeftOut, match=rf"leaves out {field.name}\b"):
            statements.inserted(model, without, ignore_conflicts=True)
        with pytest.raises(statements.FieldLeftOut, match=rf"leaves out {field.name}\b"):
            statements.rows_inserted(model, list(without), [list(without.values())])
        with pytest.raises(statements.FieldLeftOut, match=rf"leaves out {field.name}\b"):
            statements.rows_upserted(model, list(without), [list(without.values())])


@pytest.mark.parametrize("model", project_models(), ids=model_id)
def test_the_builders_that_take_an_object_write_every_field_of_it(model):
    """`object_inserted`, `objects_inserted`, `created` and `upserted` take no field names: they
    write every one the model has, so a new field is written without anyone naming it."""
    values = statements.object_values(model())
    assert list(values) == [field.attname for field in written_fields(model)]


def test_a_counter_upsert_adds_and_a_conditional_update_says_whether_it_updated(db):
    """The counts' upsert adds to the stored count rather than replacing it, and an update whose
    condition no longer holds writes nothing and says so."""
    statements.write_all(
        *statements.rows_upserted(TaskCount, ["status", "count"], [("x", 2)], added=("count",))
    )
    statements.write_all(
        *statements.rows_upserted(
            TaskCount, ["status", "count"], [("x", 3), ("y", -1)], added=("count",)
        )
    )
    assert dict(TaskCount.objects.values_list("status", "count")) == {"x": 5, "y": -1}

    call = call_create(title="Close me", body="Once.", kind="feedback")
    closing = {"status": CallStatus.CLOSED, "closed_at": call.created_at}
    still_open = {"status": CallStatus.OPEN}
    update = statements.updated_if(Call, call.pk, closing, where=still_open)
    assert statements.written(update) == 1
    assert statements.written(update) == 0
    assert Call.objects.get(pk=call.pk).status == CallStatus.CLOSED


def test_closing_a_call_or_revoking_an_agent_twice_changes_and_audits_it_once(make_agent):
    call = call_create(title="Close me", body="Once.", kind="feedback")
    agent = make_agent().agent
    call_close(call=call)
    closed_at = Call.objects.get(pk=call.pk).closed_at
    agent_revoke(agent=agent)
    revoked_at = Agent.objects.get(pk=agent.pk).revoked_at

    call_close(call=call)
    agent_revoke(agent=Agent.objects.get(pk=agent.pk))

    assert Call.objects.get(pk=call.pk).closed_at == closed_at
    assert Agent.objects.get(pk=agent.pk).revoked_at == revoked_at
    audited = AuditEntry.objects.filter(operation__in=["call_close", "agent_revoke"])
    assert sorted(audited.values_list("operation", flat=True)) == ["agent_revoke", "call_close"]


# --- the services ------------------------------------------------------------------------------

_INSERT = re.compile(r'INSERT INTO "?(\w+)"? \(([^)]*)\)')
# Every model a service writes rows of, each through a service below.
WRITTEN_BY_SERVICES = {
    Agent,
    AuditEntry,
    Operation,
    Task,
    Contribution,
    TaskCount,
    QueuedEntry,
    Call,
    CallResponse,
    Sweep,
    Leaf,
    Node,
    Checkpoint,
    Cosignature,
    WitnessedLog,
    CosignedCheckpoint,
    apps.get_model("a2a_gateway", "TaskForm"),
}


def inserted_columns(sql: str) -> list[tuple[type[Model], set[str]]]:
    """Each INSERT in one statement (several, on PostgreSQL, in a WITH): its model and columns."""
    by_table = {model._meta.db_table: model for model in apps.get_models()}
    return [
        (by_table[table], {name.strip().strip('"') for name in named.split(",")})
        for table, named in _INSERT.findall(sql)
    ]


def test_every_row_every_service_writes_holds_every_field_of_its_model(
    settings, make_agent, poster, post_task, contribute, time_machine, witnessed
):
    witnessed()
    witness, followed = Witness(), Log("example.test/log-a")
    settings.CAIRN_WITNESS_SIGNING_KEY = _pem(witness.key)
    settings.CAIRN_WITNESSED_LOGS = [followed.vkey]

    with CaptureQueriesContext(connection) as queries:
        contributor = make_agent()
        task = post_task(poster)
        contribute(contributor, task)
        call = call_create(title="What next?", body="Name one source.", kind="feedback")
        call_answer(
            Caller(contributor.agent, str(uuid.uuid4()), Door.HTTP),
            call_id=call.pk,
            payload=answer_payload(),
        )
        call.title = "What should Cairn review next?"
        call_edit(call=call)
        call_close(call=call)
        agent_revoke(agent=make_agent().agent)
        time_machine.move_to(task.deadline, tick=True)
        assert evaluate_due() == 1
        assert sequence_log() == 3  # the post, the contribution, the evaluation
        add_checkpoint(followed.submission(0, 5))

    written: dict[type[Model], int] = defaultdict(int)
    for query in queries:
        for model, named in inserted_columns(query["sql"]):
            expected = {field.column for field in written_fields(model)}
            assert named == expected, f"{model.__name__}: {query['sql']}"
            written[model] += 1
    assert set(written) == WRITTEN_BY_SERVICES
    assert Cosignature.objects.count() == 3 and WitnessedLog.objects.get().tree_size == 5


# --- nothing else writes rows --------------------------------------------------------------------

# Calls that write rows whatever they are called on.
_ALWAYS_WRITES = {
    "save",
    "delete",
    "bulk_create",
    "bulk_update",
    "update_or_create",
    "get_or_create",
}
# Calls that write rows when called on a manager or a queryset (`dict.update` does not).
_WRITES_ON_A_QUERY = {"create", "update"}
_QUERY_METHODS = {"objects", "filter", "exclude", "all", "select_for_update", "using"}
# Statements' text: a hand-written write, wherever it is sent from.
_SQL_WRITE = re.compile(r"\b(INSERT INTO|DELETE FROM|ON CONFLICT)\b|\bUPDATE \S+ SET\b")
# django-q2's cluster statistics, which its broker keeps in the cache, not in a row.
_NOT_ROWS = {("cairn/worker.py", "Stat")}


def _receiver_names(node: ast.expr) -> set[str]:
    """The names along a call's receiver: `Call.objects.filter(...)` gives Call, objects, filter."""
    names = set()
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
            node = node.value
        elif isinstance(node, ast.Name):
            names.add(node.id)
            return names
        else:
            return names


def _text(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_text(part) or "{}" for part in node.values)
    return None


def row_writes(path: Path, relative: str) -> list[tuple[int, str]]:
    """Each way `path` writes rows but through `core.statements`: its line, and what it is."""
    tree = ast.parse(path.read_text(), filename=str(path))
    # An f-string's parts are strings of their own: its text is read whole, once.
    parts = {
        id(part)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for part in node.values
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method, receiver = node.func.attr, _receiver_names(node.func.value)
            if any((relative, name) in _NOT_ROWS for name in receiver):
                continue
            if (
                method in _ALWAYS_WRITES
                or method == "executemany"
                or (method in _WRITES_ON_A_QUERY and receiver & _QUERY_METHODS)
            ):
                found.append((node.lineno, f".{method}()"))
        elif isinstance(node, ast.expr) and id(node) not in parts:
            text = _text(node)
            if text is not None and _SQL_WRITE.search(text):
                found.append((node.lineno, text[:60]))
    return sorted(found)


def test_the_scan_sees_every_way_of_writing_a_row(tmp_path):
    module = tmp_path / "services.py"
    module.write_text(
        "def f(call, cursor, table, rows, values):\n"
        "    Call.objects.create(title='t')\n"
        "    call.save(update_fields=['title'])\n"
        "    Call.objects.filter(pk=call.pk).update(status='closed')\n"
        "    Sweep.objects.update_or_create(pk=1)\n"
        "    Leaf.objects.bulk_create(rows)\n"
        "    cursor.executemany(f'INSERT INTO {table} (a) VALUES (%s)', rows)\n"
        "    cursor.execute(f'UPDATE {table} SET a = %s', rows)\n"
        "    values.update(rows)\n"
        "    Stat(call).save()\n"
        "    return {'UPDATE': 'Update the call'}\n"
    )
    written = [2, 3, 4, 5, 6, 7, 7, 8]
    assert [line for line, _ in row_writes(module, "services.py")] == [*written, 10]
    assert [line for line, _ in row_writes(module, "cairn/worker.py")] == written


@pytest.mark.parametrize("package", PRODUCT)
def test_no_product_module_writes_rows_but_through_the_statements(package):
    found: dict[str, list[tuple[int, str]]] = {}
    for path in (ROOT / package).rglob("*.py"):
        if "migrations" in path.parts or path == STATEMENTS:
            continue
        relative = str(path.relative_to(ROOT))
        if writes := row_writes(path, relative):
            found[relative] = writes
    assert found == {}
