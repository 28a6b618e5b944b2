"""The JSON Schemas published under `/schemas/a2a/` (SPEC §12), by file name. Every door links to
them, so the registry sits in the domain app that sees both apps' models."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from calls.payloads import CallResponsePayload
from core.payloads import model_schema
from tasks.payloads import ContributionPayload, OpenTaskPayload, SealedContributionPayload
from tasks.view_models import TaskView

SCHEMA_PATH = "/schemas/a2a/"
PUBLISHED_SCHEMAS: dict[str, type[BaseModel]] = {
    "open-task.json": TaskView,
    "open-task-create.json": OpenTaskPayload,
    "task-contribution.json": ContributionPayload,
    "task-contribution-sealed.json": SealedContributionPayload,
    "call-response.json": CallResponsePayload,
}


def schema_url(name: str, *, origin: str) -> str:
    """The absolute URL of one of the `/schemas/a2a/*.json` documents, which is also its `$id`."""
    return f"{origin}{SCHEMA_PATH}{name}"


def published_schema(name: str, *, origin: str) -> dict[str, Any]:
    return model_schema(PUBLISHED_SCHEMAS[name], schema_id=schema_url(name, origin=origin))


def published_schema_url(model: type[BaseModel], *, origin: str) -> str:
    name = next(name for name, published in PUBLISHED_SCHEMAS.items() if published is model)
    return schema_url(name, origin=origin)
