"""What every payload model shares: text that hides nothing, pydantic errors turned into issues, and
the JSON Schema published from the model, so the published shape cannot drift from the checked one."""

from __future__ import annotations

import re
from typing import Annotated, Any, TypeVar, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails

from core.clock import INSTANT_FORM, INSTANT_PATTERN
from core.errors import ErrorCode, Issue, Refusal

DIALECT = "https://json-schema.org/draft/2020-12/schema"
# Control characters (other than the newline) and the invisible or direction-changing
# characters that let a text read differently from what was approved (SPEC §3.1).
HIDDEN_CLASS = (
    r"\x00-\x09\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
)
_HIDDEN = re.compile(f"[{HIDDEN_CLASS}]")
# The same rule in the published schemas, so a schema-valid text is one the server takes.
_VISIBLE_PATTERN = f"^[^{HIDDEN_CLASS}]*$"


def _no_hidden_characters(text: str) -> str:
    if _HIDDEN.search(text):
        raise ValueError("holds a control or invisible character (only \\n is allowed)")
    return text


def text(min_length: int, max_length: int, description: str) -> Any:
    """A public text field: bounded, and free of control and invisible characters."""
    return Annotated[
        str,
        Field(
            min_length=min_length,
            max_length=max_length,
            description=description,
            json_schema_extra={"pattern": _VISIBLE_PATTERN},
        ),
        AfterValidator(_no_hidden_characters),
    ]


def _unique(items: list[str]) -> list[str]:
    if len(set(items)) != len(items):
        raise ValueError("items must be unique")
    return items


def url_list(description: str) -> Any:
    return Annotated[
        list[text(1, 500, "An https URL.")],
        Field(
            min_length=1,
            max_length=10,
            description=description,
            json_schema_extra={"uniqueItems": True},
        ),
        AfterValidator(_unique),
    ]


class Payload(BaseModel):
    """Strict: no coercion and no unknown fields, so what was approved is what is stored."""

    model_config = ConfigDict(extra="forbid", strict=True)


P = TypeVar("P", bound=Payload)


def model_schema(model: type[BaseModel], *, schema_id: str | None = None) -> dict[str, Any]:
    """The model's JSON Schema (2020-12) as it validates input, with `$schema` and, given one, `$id`."""
    schema: dict[str, Any] = {"$schema": DIALECT}
    if schema_id:
        schema["$id"] = schema_id
    schema.update(model.model_json_schema(by_alias=True, mode="validation"))
    return schema


def schema_name(model: type[Payload]) -> str:
    """The schema a payload model takes, read from its one `schema` value so it is written once."""
    (name,) = get_args(model.model_fields["schema_"].annotation)
    return str(name)


def json_path(location: tuple[str | int, ...]) -> str:
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
    return path


def issue_message(error: ErrorDetails) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown field"
    if error["type"] == "missing":
        return "required field is missing"
    if error["type"] == "string_pattern_mismatch" and error["ctx"]["pattern"] == INSTANT_PATTERN:
        return f"must be written as {INSTANT_FORM}"
    return error["msg"].removeprefix("Value error, ")


def parse_payload(model: type[P], payload: Any, *, also: tuple[str, ...] = ()) -> P:
    """Validate a raw payload against its model, refusing with every shape issue at once. Another
    `schema` than the model's is `unknown_schema` unexamined: the rest means nothing to this
    server. `also`: the other schemas the same write takes, for the refusal to list."""
    schema = schema_name(model) if "schema_" in model.model_fields else None
    if schema and isinstance(payload, dict) and "schema" in payload and payload["schema"] != schema:
        expected = " or ".join(repr(name) for name in (schema, *also))
        raise Refusal(
            ErrorCode.UNKNOWN_SCHEMA,
            f"this server takes schema {expected}",
            [Issue("schema", ErrorCode.UNKNOWN_SCHEMA, f"expected {expected}")],
        )
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        issues = [
            Issue(json_path(error["loc"]), ErrorCode.INVALID_PAYLOAD, issue_message(error))
            for error in exc.errors()
        ]
        raise Refusal(
            ErrorCode.INVALID_PAYLOAD, "the payload does not have the required shape", issues
        ) from None
