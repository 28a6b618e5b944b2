"""Fetching a public object by the id a client sent."""

from __future__ import annotations

import uuid
from typing import Any, TypeVar

from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Model

from core.errors import ErrorCode, Refusal

M = TypeVar("M", bound=Model)


def id_or_not_found(raw_id: Any, *, what: str) -> uuid.UUID:
    """The UUID a client sent; anything else cannot name an object, so it is `not_found`."""
    try:
        return raw_id if isinstance(raw_id, uuid.UUID) else uuid.UUID(str(raw_id))
    except ValueError:
        raise Refusal(ErrorCode.NOT_FOUND, f"no {what} has this id") from None


def get_by_id(model: type[M], raw_id: Any, *, what: str) -> M:
    """The object whose UUID is `raw_id`; anything else, well-formed or not, is `not_found`."""
    try:  # get(), not first(): no ORDER BY to build or sort
        return model._default_manager.get(pk=id_or_not_found(raw_id, what=what))
    except ObjectDoesNotExist:
        raise Refusal(ErrorCode.NOT_FOUND, f"no {what} has this id") from None
