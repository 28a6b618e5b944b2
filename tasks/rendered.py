"""A task's public forms, rendered once when the task changes and stored beside it.

Zulip's `rendered_content`: the writer renders, every reader is served the stored text. A task
changes three times at most (posted, a contribution counted, evaluated), each time inside a
service's transaction, and is read far more often; rendering at the write keeps the reads to one
column. The forms come from `task_view`, which holds no sealed content, so no stored form can.

The domain renders the §3.2 view; a door that has a form of its own (A2A's Task JSON, as its SDK
serialises it) registers a renderer at start-up, so the domain never imports a door.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from typing import Any

import orjson
from django.db import connection
from django.db.models import JSONField

from tasks.models import Task

# Bump when a form's rendering changes: stored rows below it are rendered again (a migration, or
# `tasks_render_stale`) and readers treat them as not rendered until then.
RENDER_VERSION = 1
FORM_FIELDS = ("view_json", "a2a_json", "a2a_list_json")
RENDERED_FIELDS = (*FORM_FIELDS, "rendered_version")
# The count as a form holds it: the key, then the number, as an int or as a Struct's double (`2.0`).
# Inside a JSON string every quote is escaped, so this can only match the key itself.
_COUNT = re.compile(r'"contributions_received":(\d+)(?:\.0)?(?=[,}])')
# Where orjson may write a float otherwise than Python: below 1e-4, Python writes `1e-05` and
# orjson `1e-5` or `0.00001`. Such a number starts the text or follows `:`, `,` or `[`; a
# string that only looks so costs a second encoding, not a wrong one.
_NUMBER_CHARS = frozenset("0123456789.")
_BEFORE_NUMBER = frozenset(":,[")

# A renderer takes the public view and returns {Task field: text} for the fields it owns.
FormRenderer = Callable[[dict[str, Any]], Mapping[str, str]]
_renderers: dict[str, FormRenderer] = {}


def form_renderer_register(name: str, renderer: FormRenderer) -> None:
    """Let a door add its forms to every rendering (call from its AppConfig.ready)."""
    _renderers[name] = renderer


class PythonFloat(float):
    """A float `json_text` writes with `json.dumps`: orjson refuses every float subclass."""


# Below this orjson writes a float otherwise than `json.dumps` (`1e-05` against `0.00001`).
_SMALL_FLOAT = 1e-4


def float_marked(number: float) -> float:
    """`number` as `json_text(..., floats_marked=True)` expects it: a `PythonFloat` when orjson
    would write it otherwise than `json.dumps`."""
    return PythonFloat(number) if 0 < abs(number) < _SMALL_FLOAT else number


def json_text(value: Any, *, floats_marked: bool = False) -> str:
    """Compact JSON as Starlette and the SDK write it (non-ASCII kept, no spaces): the bytes of
    `json.dumps`, which the SDK's dispatcher uses. orjson writes the same bytes 6–8× faster
    (bench/README.md, F29) except for what it refuses (an int beyond 64 bits, a lone surrogate)
    and for small floats; those two go to `json.dumps`, which decides them as it always did.
    A caller that passed every float in `value` through `float_marked` (`floats_marked`) has
    orjson refuse the small ones, and spares the search of the text for them."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        return _python_json_text(value)
    if not floats_marked and _may_hold_small_float(text):
        return _python_json_text(value)
    return text


def _may_hold_small_float(text: str) -> bool:
    """Whether orjson may have written a float below 1e-4 in `text`. Most views hold `e-` inside
    a UUID or a word, so each `e-` is looked at where it stands: a regular expression searching
    the whole text took 22 µs a form and ran for two forms in three (F32)."""
    if "0.0000" in text:
        return True
    found = text.find("e-")
    while found != -1:
        start = found
        while start > 0 and text[start - 1] in _NUMBER_CHARS:
            start -= 1
        if start > 0 and text[start - 1] == "-":
            start -= 1
        if start < found and (start == 0 or text[start - 1] in _BEFORE_NUMBER):
            return True
        found = text.find("e-", found + 2)
    return False


def _python_json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


@cache
def _jsonb_keys(keys: tuple[str, ...]) -> tuple[str, ...]:
    """Keys in PostgreSQL's `jsonb` order (shorter keys first, then by their bytes). A view holds
    few distinct key sets (the view's, a budget's, an evaluation's, a report's), so each is sorted
    once per process; the sweep orders thousands of evaluations."""
    return tuple(sorted(keys, key=lambda key: (len(key.encode()), key.encode())))


def _jsonb_order(value: Any) -> Any:
    """A JSON value with its keys in `jsonb` order: the order a read of the row gives back."""
    if isinstance(value, dict):
        ordered = {}
        for key in _jsonb_keys(tuple(value)):
            item = value[key]
            ordered[key] = _jsonb_order(item) if isinstance(item, (dict, list)) else item
        return ordered
    if isinstance(value, list):
        return [_jsonb_order(item) if isinstance(item, (dict, list)) else item for item in value]
    return value


@cache
def _json_fields() -> frozenset[str]:
    return frozenset(field.name for field in Task._meta.fields if isinstance(field, JSONField))


def _as_read_back(view: dict[str, Any]) -> dict[str, Any]:
    """The view as a read of the saved row would build it. A JSON column on PostgreSQL is
    `jsonb`, which keeps its own key order, so a value still in memory is put in that order:
    the stored forms then hold the very bytes a render at read time would."""
    if connection.vendor != "postgresql":
        return view
    json_fields = _json_fields()
    return {
        key: _jsonb_order(value) if key in json_fields else value for key, value in view.items()
    }


def task_render(task: Task) -> None:
    """Set the task's stored forms from its current fields; saving them is the caller's, in the
    same transaction as the change they follow."""
    # selectors imports the evaluation, which renders: imported here to keep that cycle open.
    from tasks.selectors import task_view

    view = _as_read_back(task_view(task))
    task.view_json = json_text(view)
    for renderer in _renderers.values():
        for field, text in renderer(view).items():
            setattr(task, field, text)
    task.rendered_version = RENDER_VERSION


def task_count_contribution(task: Task) -> None:
    """Count one more contribution: the task's count and its stored forms. The count is one number
    in each form, so the new forms are the old with that number replaced, the very bytes a render
    would write, for a twentieth of its cost (bench/README.md, F24). A form that does not hold the
    old count exactly once (a row rendered before this version, a renderer that writes the count
    elsewhere) is rendered afresh."""
    previous = task.contributions_count
    task.contributions_count += 1
    forms = {}
    for field in FORM_FIELDS if is_rendered(task) else ():
        text = getattr(task, field)
        found = list(_COUNT.finditer(text))
        if len(found) != 1 or int(found[0][1]) != previous:
            break
        start, end = found[0].span(1)
        forms[field] = f"{text[:start]}{task.contributions_count}{text[end:]}"
    if len(forms) != len(FORM_FIELDS):
        task_render(task)
        return
    for field, text in forms.items():
        setattr(task, field, text)


def is_rendered(task: Task) -> bool:
    return task.rendered_version == RENDER_VERSION


def stored_view(task: Task) -> dict[str, Any]:
    """The §3.2 view as stored at the last change; rendered afresh for a row not rendered yet."""
    if is_rendered(task) and task.view_json:
        return json.loads(task.view_json)
    from tasks.selectors import task_view

    return task_view(task)


def tasks_render(tasks: Iterable[Task]) -> int:
    """Render and store the forms of these tasks (rows written before their forms existed)."""
    count = 0
    for task in tasks:
        task_render(task)
        task.save(update_fields=list(RENDERED_FIELDS))
        count += 1
    return count


def tasks_render_stale(*, batch_size: int = 500) -> int:
    """Render every task whose stored forms are missing or older than `RENDER_VERSION`."""
    total = 0
    while True:
        batch = list(Task.objects.exclude(rendered_version=RENDER_VERSION)[:batch_size])
        if not batch:
            return total
        total += tasks_render(batch)
