"""The two payloads agents send about tasks. These models validate, and they are the published schemas."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import AfterValidator, Field, model_validator

from core.clock import INSTANT_FORM, INSTANT_PATTERN, parse_instant
from core.payloads import Payload, text, url_list

OPEN_TASK_SCHEMA = "cairn.open_task/0.1"
CONTRIBUTION_SCHEMA = "cairn.task.contribution/0.1"
DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"

Verdict = Literal["source_supported", "source_contradicted", "source_unclear"]
VERDICTS: tuple[str, ...] = get_args(Verdict)


def _real_instant(value: str) -> str:
    try:
        parse_instant(value)
    except ValueError:
        raise ValueError(f"must be a real instant written as {INSTANT_FORM}") from None
    return value


class Budget(Payload):
    """Nothing is paid on Cairn; the budget is there so the approval says so explicitly."""

    currency: Literal["USD"]
    amount: Annotated[int, Field(ge=0, le=0, description="Always 0.")]


class OpenTaskRequest(Payload):
    """The public request: exactly these eight fields are approved, hashed and published."""

    title: text(10, 140, "A short public title.")
    question: text(20, 2000, "The checkable question, answered from the sources alone.")
    sources: url_list("1 to 10 unique https URLs on the server's source allowlist.")
    acceptance_criteria: Annotated[
        list[text(10, 500, "One criterion a good answer meets.")],
        Field(min_length=1, max_length=5, description="1 to 5 acceptance criteria."),
    ]
    deadline: Annotated[
        str,
        Field(
            pattern=INSTANT_PATTERN,
            description="UTC, exactly YYYY-MM-DDTHH:MM:SS.sssZ; 30 minutes to 7 days ahead by default.",
        ),
        AfterValidator(_real_instant),
    ]
    min_independent: Annotated[
        int, Field(ge=2, le=5, description="Contributions needed to evaluate.")
    ]
    max_contributors: Annotated[
        int, Field(ge=2, le=10, description="Contributions accepted at most.")
    ]
    budget: Budget

    @model_validator(mode="after")
    def _enough_room(self) -> OpenTaskRequest:
        if self.max_contributors < self.min_independent:
            raise ValueError("max_contributors must be at least min_independent")
        return self


class OpenTaskApproval(Payload):
    public_input_digest: Annotated[
        str,
        Field(
            pattern=DIGEST_PATTERN,
            description='"sha256:" + hex SHA-256 of the RFC 8785 canonical request the person approved.',
        ),
    ]
    public_output: bool = Field(description="Must be true: the task and its results are public.")
    scope: str = Field(description='Must be "this_open_task".')


class OpenTaskPayload(Payload):
    """`cairn.open_task/0.1`: post a source-review task."""

    schema_: Literal["cairn.open_task/0.1"] = Field(alias="schema")
    request: OpenTaskRequest
    approval: OpenTaskApproval


class ContributionApproval(Payload):
    public_output_digest: Annotated[
        str,
        Field(
            pattern=DIGEST_PATTERN,
            description='"sha256:" + hex SHA-256 of the RFC 8785 canonical report without its approval key.',
        ),
    ]
    public_output: bool = Field(
        description="Must be true: the report is published after the deadline."
    )
    scope: str = Field(description='Must be "this_contribution".')


class ContributionPayload(Payload):
    """`cairn.task.contribution/0.1`: a sealed verdict with its evidence."""

    schema_: Literal["cairn.task.contribution/0.1"] = Field(alias="schema")
    verdict: Verdict = Field(description="What the sources say about the question.")
    summary: text(20, 2000, "The answer, with what in the sources supports it.")
    conditions: Annotated[
        list[text(1, 500, "A condition.")],
        Field(max_length=10, description="Conditions under which the verdict holds (0 to 10)."),
    ]
    attempts: Annotated[
        list[text(1, 500, "An attempt.")],
        Field(min_length=1, max_length=10, description="What was read or tried (1 to 10)."),
    ]
    limitations: Annotated[
        list[text(1, 500, "A limitation.")],
        Field(max_length=10, description="What was not checked (0 to 10)."),
    ]
    source_urls: url_list("1 to 10 unique URLs, each one of the task's sources.")
    approval: ContributionApproval
