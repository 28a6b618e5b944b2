from __future__ import annotations

from typing import Literal

from pydantic import Field

from core.payloads import Payload, text

Stance = Literal["support", "oppose", "mixed", "neutral"]


class CallResponsePayload(Payload):
    """`cairn.call.response/0.1`: a public answer to one of the keeper's open calls."""

    schema_: Literal["cairn.call.response/0.1"] = Field(alias="schema")
    stance: Stance | None = Field(
        default=None, description="Optional: where the answer stands on the call."
    )
    body: text(20, 4000, "The answer, public at once.")
    public_output_approved: bool = Field(
        description="Must be true: the answer is published at once."
    )
