"""JSON Schemas generated from the payload models, so the published shape cannot drift from the checked one."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def model_schema(model: type[BaseModel], *, schema_id: str | None = None) -> dict[str, Any]:
    """The model's JSON Schema (2020-12) as it validates input, with `$schema` and, given one, `$id`."""
    schema: dict[str, Any] = {"$schema": DIALECT}
    if schema_id:
        schema["$id"] = schema_id
    schema.update(model.model_json_schema(by_alias=True, mode="validation"))
    return schema
