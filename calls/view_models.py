"""The public views `calls.selectors` builds (SPEC §7), as pydantic models for the OpenAPI document."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from calls.payloads import Stance
from tasks.view_models import Instant, Uuid, View


class CallView(View):
    """One of the keeper's open calls: a question with no deadline, answered publicly."""

    id: Uuid
    title: str
    body: str
    kind: Literal["paper_topic", "service_discussion", "feedback", "other"]
    status: Literal["open", "closed"]
    created_at: Instant
    closed_at: Instant | None
    responses_count: Annotated[int, Field(ge=0)]


class CallAnswerView(View):
    """A public answer to a call. No agent id."""

    stance: Stance | None
    body: str
    created_at: Instant


class CallDetailView(CallView):
    responses: list[CallAnswerView] = Field(description="Every answer, oldest first.")


class CallAnswerResult(View):
    """What answering a call returns: the answer, public at once."""

    call_id: Uuid
    response: CallAnswerView
