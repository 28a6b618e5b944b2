"""Every row the project writes, as plain SQL built once a process from the models' own tables
and columns: building ORM queries on the write path cost more CPU than PostgreSQL spent running
them, and psycopg prepares a statement its connection runs again. Values pass through the fields'
own conversions both ways, so the same text runs on PostgreSQL and SQLite.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, TypeVar

import orjson
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper
from django.db.models import (
    CharField,
    DateTimeField,
    Field,
    IntegerField,
    JSONField,
    Model,
    TextField,
    UUIDField,
)
from django.db.models.expressions import Col
from psycopg.types.json import Jsonb

from core.replicas import reading

Converter = Callable[[Any, Col, Any], Any]
M = TypeVar("M", bound=Model)


@cache
def vendor() -> str:
    """The database's kind, asked once: on an event loop, Django makes each task a connection
    wrapper of its own to answer it."""
    return connections[DEFAULT_DB_ALIAS].vendor


def table(model: type[Model]) -> str:
    return _quoted(model._meta.db_table, vendor())


@cache
def _quoted(name: str, vendor: str) -> str:
    return connection.ops.quote_name(name)


@cache
def _field(model: type[Model], name: str) -> Field:
    """A concrete field by its name or its column's attribute name (`agent` or `agent_id`)."""
    field = model._meta.get_field(name)
    assert isinstance(field, Field) and field.column, f"{model.__name__}.{name} has no column"
    return field


def column(model: type[Model], name: str) -> str:
    name_in_table = _field(model, name).column
    assert name_in_table is not None
    return _quoted(name_in_table, vendor())


def columns(model: type[Model], names: Sequence[str]) -> str:
    return ", ".join(column(model, name) for name in names)


def prepared(build: Callable[[], str]) -> Callable[[], str]:
    """A statement's text, built by `build` once per process."""
    return cache(build)


def for_update(*, skip_locked: bool = False) -> str:
    """The row-lock clause where the database has one. SQLite has none: its write transaction
    locks the whole database, which is why Django's `select_for_update` leaves it out too."""
    if not connection.features.has_select_for_update:
        return ""
    return " FOR UPDATE SKIP LOCKED" if skip_locked else " FOR UPDATE"


def _db() -> BaseDatabaseWrapper:
    """The connection itself, not the `django.db.connection` proxy: each attribute read through
    asgiref's context-local storage is a look-up, and a conversion reads several."""
    return connections[DEFAULT_DB_ALIAS]


def db_value(model: type[Model], name: str, value: Any) -> Any:
    """A Python value as the field saves it (a UUID as hex on SQLite, JSON adapted, ...)."""
    return _db_value(_db(), model, name, value)


def _db_value(db: BaseDatabaseWrapper, model: type[Model], name: str, value: Any) -> Any:
    if db.vendor == "postgresql":
        kind = _as_sent_on_postgresql(model, name)
        if type(value) is kind and (not isinstance(value, datetime) or value.tzinfo is not None):
            return value  # a naive datetime is left to Django, which makes it aware
        if kind is Jsonb and value is not None:
            return Jsonb(value, dumps=_jsonb_text)
    return _field(model, name).get_db_prep_save(value, db)


# Values of exactly these types are sent to PostgreSQL as they are (psycopg adapts them), skipping
# Django's chain of conversions, which the sweep would run for a dozen fields a task.
_SENT_AS_THEY_ARE: tuple[tuple[type[Field], type], ...] = (
    (UUIDField, uuid.UUID),
    (DateTimeField, datetime),
    (IntegerField, int),
    (CharField, str),
    (TextField, str),
)


@cache
def _as_sent_on_postgresql(model: type[Model], name: str) -> type | None:
    """The Python type a value of this field is sent as unconverted, or Jsonb for a JSON field,
    written by orjson: `jsonb` parses it, so any JSON text of the value will do."""
    field = _field(model, name)
    if isinstance(field, JSONField):
        return Jsonb
    if isinstance(field, DateTimeField) and not settings.USE_TZ:
        return None
    return next((python for kind, python in _SENT_AS_THEY_ARE if isinstance(field, kind)), None)


def _jsonb_text(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError:  # an int beyond 64 bits, say: `json.dumps` writes or refuses it, as Django
        return json.dumps(value).encode()


@cache
def _converters(
    model: type[Model], names: tuple[str, ...], vendor: str
) -> tuple[tuple[list[Converter], Col], ...]:
    """What the ORM's compiler applies to each column it reads: the backend's and the field's."""
    # Each field's own column expression: a foreign key's reads as its target's (a UUID).
    cols = [_field(model, name).get_col(model._meta.db_table) for name in names]
    return tuple(
        (connection.ops.get_db_converters(col) + col.get_db_converters(connection), col)
        for col in cols
    )


def python_values(model: type[Model], names: tuple[str, ...], row: Sequence[Any]) -> list[Any]:
    """A row of `names` as the ORM would read it."""
    db = _db()
    values = []
    for value, (converters, col) in zip(row, _converters(model, names, db.vendor), strict=True):
        for convert in converters:
            value = convert(value, col, db)
        values.append(value)
    return values


Params = Sequence[Any] | Mapping[str, Any]


def fetch_one(sql: str, params: Params) -> tuple[Any, ...] | None:
    """One row, read where this context reads (`core.replicas.reading`)."""
    with connections[reading()].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def fetch_all(sql: str, params: Params) -> list[tuple[Any, ...]]:
    """Every row, read where this context reads (`core.replicas.reading`)."""
    with connections[reading()].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def execute(sql: str, params: Params) -> None:
    with sent(sql, params):
        pass


def sent(sql: str, params: Params) -> CursorWrapper:
    """A statement run on the primary, its cursor left open for its rows (the caller closes it):
    inside `pipelined`, they are there once the block has ended."""
    cursor = connection.cursor()
    cursor.execute(sql, params)
    return cursor


@contextmanager
def pipelined() -> Iterator[None]:
    """Send the statements run inside as one round trip when the block ends. The database still
    runs them in turn, each with a snapshot taken as it starts, so one waiting for a lock holds back
    the rest; their rows (`sent`) and any error come as the block ends. SQLite needs none."""
    if vendor() != "postgresql":
        yield
        return
    connection.ensure_connection()
    with connection.wrap_database_errors, connection.connection.pipeline():
        yield


def instance(model: type[M], names: tuple[str, ...], row: Sequence[Any]) -> M:
    """A model object from a row of `names`, as a queryset makes it (fields not read deferred)."""
    return model.from_db(connection.alias, list(names), python_values(model, names, row))


def locked(
    model: type[M],
    where: str,
    params: Params,
    *,
    names: Sequence[str] = (),
    order_by: str = "",
    limit: int | None = None,
    skip_locked: bool = False,
) -> list[M]:
    """The rows `where` selects as objects of `names` (every field when none), locked on the
    primary until the transaction ends: the one way a service locks rows."""
    read = tuple(names) or tuple(field.name for field in model._meta.concrete_fields)
    sql = _locked_sql(model, where, read, order_by, limit, skip_locked, vendor())
    with sent(sql, params) as cursor:
        return [instance(model, read, row) for row in cursor.fetchall()]


def lock(model: type[Model], where: str, params: Params) -> None:
    """Take the locks `locked` takes without reading the rows back, so that inside `pipelined`
    the statements after it go with it."""
    key = (model._meta.pk.name,)
    execute(_locked_sql(model, where, key, "", None, False, vendor()), params)


@cache
def _locked_sql(
    model: type[Model],
    where: str,
    names: tuple[str, ...],
    order_by: str,
    limit: int | None,
    skip_locked: bool,
    vendor: str,
) -> str:
    sql = f"SELECT {columns(model, names)} FROM {table(model)} WHERE {where}"
    if order_by:
        sql += f" ORDER BY {order_by}"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return sql + for_update(skip_locked=skip_locked)


def advisory_lock(*keys: int, wait: bool = True) -> bool:
    """Hold the lock named by `keys` (one 64-bit key, or two 32-bit ones) until the transaction
    ends, which a transaction pooler allows; `wait=False`: True only when no other transaction held
    it. SQLite needs none: its IMMEDIATE transaction already holds the database's write lock."""
    if vendor() != "postgresql":
        return True
    cast = "bigint" if len(keys) == 1 else "integer"
    arguments = ", ".join(f"%s::{cast}" for _ in keys)
    function = "pg_advisory_xact_lock" if wait else "pg_try_advisory_xact_lock"
    with sent(f"SELECT {function}({arguments})", list(keys)) as cursor:
        return wait or bool(cursor.fetchone()[0])


@dataclass(frozen=True)
class Write:
    sql: str
    params: list[Any]


def write_all(*writes: Write) -> None:
    """Send these writes, in order: on PostgreSQL as one statement, each but the last in a WITH,
    to save round trips. The parts of one statement share its snapshot, so the writes must not
    read each other's rows. SQLite runs in process and takes them one by one."""
    if len(writes) < 2 or vendor() != "postgresql":
        for write in writes:
            execute(write.sql, write.params)
        return
    *leading, last = writes
    execute(
        "".join(
            f"{'WITH' if index == 0 else ','} w{index} AS ({write.sql}) "
            for index, write in enumerate(leading)
        )
        + last.sql,
        [param for write in writes for param in write.params],
    )


class FieldLeftOut(Exception):
    """An INSERT that would leave a model's field without a value."""


def _written_fields(model: type[Model]) -> list[Field]:
    auto = model._meta.auto_field
    return [field for field in model._meta.concrete_fields if field is not auto]


def _values(
    db: BaseDatabaseWrapper, model: type[Model], names: Sequence[str], row: Sequence[Any]
) -> list[Any]:
    return [_db_value(db, model, name, value) for name, value in zip(names, row, strict=True)]


def object_values(obj: Model) -> dict[str, Any]:
    return {field.attname: getattr(obj, field.attname) for field in _written_fields(type(obj))}


def _object_rows(objs: Sequence[Model]) -> tuple[type[Model], tuple[str, ...], list[list[Any]]]:
    model = type(objs[0])
    names = tuple(field.attname for field in _written_fields(model))
    return model, names, [[getattr(obj, name) for name in names] for obj in objs]


@cache
def _insert_sql(
    model: type[Model],
    names: tuple[str, ...],
    vendor: str,
    ignore_conflicts: bool = False,
    many: bool = False,
) -> str:
    named = {_field(model, name).name for name in names}
    missing = [field.name for field in _written_fields(model) if field.name not in named]
    if missing:
        raise FieldLeftOut(f"an INSERT into {model.__name__} leaves out {', '.join(missing)}")
    if many:
        rows = f"SELECT * FROM unnest({', '.join(_array(model, name) for name in names)})"
    else:
        rows = f"VALUES ({', '.join(['%s'] * len(names))})"
    conflicts = " ON CONFLICT DO NOTHING" if ignore_conflicts else ""
    return f"INSERT INTO {table(model)} ({columns(model, names)}) {rows}{conflicts}"


def inserted(
    model: type[Model], values: Mapping[str, Any], *, ignore_conflicts: bool = False
) -> Write:
    """INSERT one row of `values` (field names → Python values); `ignore_conflicts` as Django's
    `bulk_create(ignore_conflicts=True)`."""
    db = _db()
    return Write(
        _insert_sql(model, tuple(values), db.vendor, ignore_conflicts),
        _values(db, model, tuple(values), tuple(values.values())),
    )


def object_inserted(obj: Model) -> Write:
    """INSERT `obj` with every one of its fields, as `save(force_insert=True)` would."""
    return inserted(type(obj), object_values(obj))


def objects_inserted(objs: Sequence[Model]) -> tuple[Write, ...]:
    """`object_inserted` for many objects of one model, to send at once (as `rows_inserted`)."""
    return rows_inserted(*_object_rows(objs)) if objs else ()


@cache
def _returning_sql(model: type[Model], vendor: str) -> str:
    auto = model._meta.auto_field
    assert auto is not None
    return f" RETURNING {column(model, auto.name)}"


def created(obj: M) -> M:
    """INSERT `obj` now and return it as `Model.objects.create` does: its auto-numbered key read
    back (`RETURNING`, which SQLite has too) and the object marked as saved. For a row whose key
    its caller needs at once; other rows go with the write's others (`write_all`)."""
    model = type(obj)
    write = object_inserted(obj)
    auto = model._meta.auto_field
    if auto is None:
        execute(write.sql, write.params)
    else:
        row = fetch_one(write.sql + _returning_sql(model, vendor()), write.params)
        assert row is not None, "an INSERT ... RETURNING returns its row"
        (key,) = python_values(model, (auto.name,), row)
        setattr(obj, auto.attname, key)
    obj._state.adding = False
    obj._state.db = connection.alias
    return obj


@cache
def _upsert_sql(
    model: type[Model], names: tuple[str, ...], added: tuple[str, ...], vendor: str, many: bool
) -> str:
    insert = _insert_sql(model, names, vendor, many=many)
    pk_name = model._meta.pk.name
    adding = {_field(model, name).name for name in added}
    assert adding <= {_field(model, name).name for name in names}, "an added field is written"
    changed = []
    for name in names:
        field, quoted = _field(model, name), column(model, name)
        if field.name != pk_name:
            stored_plus = f"{table(model)}.{quoted} + " if field.name in adding else ""
            changed.append(f"{quoted} = {stored_plus}excluded.{quoted}")
    action = f"DO UPDATE SET {', '.join(changed)}" if changed else "DO NOTHING"
    return f"{insert} ON CONFLICT ({column(model, pk_name)}) {action}"


def upserted(objs: Sequence[Model]) -> tuple[Write, ...]:
    """Write these objects of one model whole, inserting or replacing each by its key: for a row
    that is a copy of another (a door's read model), written again at each change of its source."""
    return rows_upserted(*_object_rows(objs)) if objs else ()


def rows_upserted(
    model: type[Model],
    names: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    added: Sequence[str] = (),
) -> tuple[Write, ...]:
    """INSERT rows of `names` (as `rows_inserted`), or where a row's key is already there, UPDATE
    that row instead: each field of `added` to the stored value plus the row's (a counter moved
    by a delta, without reading it), every other to the row's. Rows are written, and so locked, in
    the order given. PostgreSQL refuses two rows of one key in one statement: give each key once."""
    names, added = tuple(names), tuple(added)
    db = _db()
    return _row_writes(
        _upsert_sql(model, names, added, db.vendor, False),
        lambda: _upsert_sql(model, names, added, db.vendor, True),
        [_values(db, model, names, row) for row in rows],
    )


@cache
def _update_sql(
    model: type[Model],
    names: tuple[str, ...],
    vendor: str,
    conditions: tuple[tuple[str, bool], ...] = (),
) -> str:
    assignments = ", ".join(f"{column(model, name)} = %s" for name in names)
    where = "".join(
        f" AND {column(model, name)} IS NULL" if is_null else f" AND {column(model, name)} = %s"
        for name, is_null in conditions
    )
    key = column(model, model._meta.pk.name)
    return f"UPDATE {table(model)} SET {assignments} WHERE {key} = %s{where}"


def updated(obj: Model, names: Sequence[str]) -> Write:
    """UPDATE these fields of `obj`'s row from the object (Django's `save(update_fields=…)`
    without its signals and its query building)."""
    model = type(obj)
    db = _db()
    return Write(
        _update_sql(model, tuple(names), db.vendor),
        [_db_value(db, model, name, getattr(obj, _field(model, name).attname)) for name in names]
        + [_db_value(db, model, model._meta.pk.name, obj.pk)],
    )


def updated_if(
    model: type[Model], key: Any, values: Mapping[str, Any], *, where: Mapping[str, Any]
) -> Write:
    """UPDATE the row keyed `key` to `values` only while each field of `where` holds its value
    (None: is NULL), in one statement: it waits for the row's lock, then checks the row as the last
    writer left it, so none comes between check and change. `written` says whether it changed."""
    db = _db()
    conditions = tuple((name, value is None) for name, value in where.items())
    return Write(
        _update_sql(model, tuple(values), db.vendor, conditions),
        [_db_value(db, model, name, value) for name, value in values.items()]
        + [_db_value(db, model, model._meta.pk.name, key)]
        + [_db_value(db, model, name, value) for name, value in where.items() if value is not None],
    )


def written(write: Write) -> int:
    """Send one write now and return how many rows it wrote."""
    with connection.cursor() as cursor:
        cursor.execute(write.sql, write.params)
        return cursor.rowcount


@cache
def _delete_any_sql(model: type[Model], vendor: str) -> str:
    key = model._meta.pk.name
    return f"DELETE FROM {table(model)} WHERE {column(model, key)} = ANY({_array(model, key)})"


def deleted(model: type[Model], keys: Sequence[Any]) -> tuple[Write, ...]:
    """DELETE the rows of these keys. On PostgreSQL the keys are one array (`= ANY`), so the
    statement's text is one whatever their count."""
    if not keys:
        return ()
    db = _db()
    values = [_db_value(db, model, model._meta.pk.name, key) for key in keys]
    if db.vendor == "postgresql":
        return (Write(_delete_any_sql(model, db.vendor), [values]),)
    key = column(model, model._meta.pk.name)
    placeholders = ", ".join(["%s"] * len(values))
    return (Write(f"DELETE FROM {table(model)} WHERE {key} IN ({placeholders})", values),)


def _array(model: type[Model], name: str) -> str:
    """A parameter sent as one array of the column's type, for `unnest`. In binary (`%b`): psycopg
    escapes a text array's every quote with a regular expression, which for the sweep's JSON
    texts cost more than the statement."""
    return f"%b::{_field(model, name).db_type(connection)}[]"


def rows_inserted(
    model: type[Model], names: Sequence[str], rows: Sequence[Sequence[Any]]
) -> tuple[Write, ...]:
    """INSERT rows of `names` (Python values), every field of the model named (as `inserted`).
    On PostgreSQL several rows are one statement over `unnest` of an array a column, which runs in
    a fraction of the time of as many one-row statements."""
    names = tuple(names)
    db = _db()
    return _row_writes(
        _insert_sql(model, names, db.vendor),
        lambda: _insert_sql(model, names, db.vendor, many=True),
        [_values(db, model, names, row) for row in rows],
    )


@cache
def _update_unnest_sql(model: type[Model], names: tuple[str, ...]) -> str:
    pk_name = model._meta.pk.name
    keyed = (*names, pk_name)
    arrays = ", ".join(_array(model, name) for name in keyed)
    aliases = ", ".join(f"v{i}" for i in range(len(keyed)))
    assignments = ", ".join(f"{column(model, name)} = v.v{i}" for i, name in enumerate(names))
    return (
        f"UPDATE {table(model)} SET {assignments} FROM unnest({arrays}) AS v({aliases}) "
        f"WHERE {table(model)}.{column(model, pk_name)} = v.v{len(names)}"
    )


def updated_many(objs: Sequence[Model], names: Sequence[str]) -> tuple[Write, ...]:
    """`updated` for many objects of one model: one statement on PostgreSQL, as `rows_inserted`."""
    if not objs:
        return ()
    model = type(objs[0])
    names = tuple(names)
    keyed = (*names, model._meta.pk.name)
    attnames = [_field(model, name).attname for name in keyed]
    db = _db()
    rows = [_values(db, model, keyed, [getattr(obj, name) for name in attnames]) for obj in objs]
    return _row_writes(
        _update_sql(model, names, db.vendor), lambda: _update_unnest_sql(model, names), rows
    )


def _row_writes(
    row_sql: str, unnest_sql: Callable[[], str], rows: list[list[Any]]
) -> tuple[Write, ...]:
    """Several rows on PostgreSQL: `unnest_sql` once, each column of `rows` one array; else
    `row_sql` for each row."""
    if len(rows) > 1 and vendor() == "postgresql":
        return (Write(unnest_sql(), [list(column) for column in zip(*rows, strict=True)]),)
    return tuple(Write(row_sql, row) for row in rows)
