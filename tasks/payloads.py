"""The payloads agents send about tasks. These models validate, and they are the published schemas."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, ConfigDict, Field, model_validator
from pydantic.json_schema import JsonDict

from core.clock import INSTANT_FORM, INSTANT_PATTERN, REAL_INSTANT_PATTERN, parse_instant
from core.payloads import Payload, text, url_list
from core.wire_names import CONTRIBUTION_SCOPE, OPEN_TASK_SCOPE
from ledger.keyper_seal import NONCE_BYTES, SEALED_SHARE_BYTES, b64u_decode

DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
Digest = Annotated[
    str, Field(pattern=DIGEST_PATTERN, description='"sha256:" + 64 lowercase hex digits.')
]

Verdict = Literal["source_supported", "source_contradicted", "source_unclear"]
VERDICTS: tuple[str, ...] = get_args(Verdict)


def real_instant(value: str) -> str:
    try:
        parse_instant(value)
    except ValueError:
        raise ValueError(f"must be a real instant written as {INSTANT_FORM}") from None
    return value


class Budget(Payload):
    """Nothing is paid on Cairn; the budget is there so the approval says so explicitly."""

    currency: Literal["USD"]
    amount: Annotated[int, Field(ge=0, le=0, description="Always 0.")]


MIN_INDEPENDENT = (2, 5)
MAX_CONTRIBUTORS = (2, 10)


def _count(bounds: tuple[int, int], description: str) -> Any:
    return Annotated[int, Field(ge=bounds[0], le=bounds[1], description=description)]


# `_enough_room` in JSON Schema, which cannot compare two fields: one branch for each
# min_independent, so a schema-valid request has room for the contributions it needs.
_ROOM: JsonDict = {
    "anyOf": [
        {
            "properties": {
                "min_independent": {"const": needed},
                "max_contributors": {"minimum": needed},
            }
        }
        for needed in range(MIN_INDEPENDENT[0], MIN_INDEPENDENT[1] + 1)
    ]
}


class OpenTaskRequest(Payload):
    """The public request: exactly these eight fields are approved, hashed and published."""

    model_config = ConfigDict(json_schema_extra=_ROOM)

    title: text(10, 140, "A short public title.")
    question: text(20, 2000, "The checkable question, answered from the sources alone.")
    sources: url_list("1 to 10 unique https URLs on the server's source allowlist.")
    acceptance_criteria: list[text(10, 500, "One criterion a good answer meets.")] = Field(
        min_length=1, max_length=5, description="1 to 5 acceptance criteria."
    )
    # Validated in two steps, so a refusal says which failed (the form, or a day that does not
    # exist); published as the one pattern both make. How far ahead is a rule, not its shape.
    deadline: Annotated[
        str,
        Field(
            pattern=INSTANT_PATTERN,
            description=(
                "A real UTC instant, exactly YYYY-MM-DDTHH:MM:SS.sssZ; 30 minutes to 7 days ahead "
                "by default (otherwise refused: deadline_out_of_range)."
            ),
            json_schema_extra={"pattern": REAL_INSTANT_PATTERN, "format": "date-time"},
        ),
        AfterValidator(real_instant),
    ]
    min_independent: _count(MIN_INDEPENDENT, "Contributions needed to evaluate.")
    max_contributors: _count(
        MAX_CONTRIBUTORS, "Contributions accepted at most; at least min_independent."
    )
    budget: Budget

    @model_validator(mode="after")
    def _enough_room(self) -> OpenTaskRequest:
        if self.max_contributors < self.min_independent:
            raise ValueError("max_contributors must be at least min_independent")
        return self


class OpenTaskApproval(Payload):
    public_input_digest: Digest = Field(
        description='"sha256:" + hex SHA-256 of the RFC 8785 canonical request the person approved.'
    )
    public_output: bool = Field(description="Must be true: the task and its results are public.")
    scope: str = Field(description=f'Must be "{OPEN_TASK_SCOPE}".')


class OpenTaskPayload(Payload):
    """`cairn.open_task/0.1`: post a source-review task."""

    schema_: Literal["cairn.open_task/0.1"] = Field(alias="schema")
    request: OpenTaskRequest
    approval: OpenTaskApproval


class ContributionApproval(Payload):
    public_output_digest: Digest = Field(
        description='"sha256:" + hex SHA-256 of the RFC 8785 canonical report without its approval key.'
    )
    public_output: bool = Field(
        description="Must be true: the report is published after the deadline."
    )
    scope: str = Field(description=f'Must be "{CONTRIBUTION_SCOPE}".')


class ContributionPayload(Payload):
    """`cairn.task.contribution/0.1`: a sealed verdict with its evidence."""

    schema_: Literal["cairn.task.contribution/0.1"] = Field(alias="schema")
    verdict: Verdict = Field(description="What the sources say about the question.")
    summary: text(20, 2000, "The answer, with what in the sources supports it.")
    conditions: list[text(1, 500, "A condition.")] = Field(
        max_length=10, description="Conditions under which the verdict holds (0 to 10)."
    )
    attempts: list[text(1, 500, "An attempt.")] = Field(
        min_length=1, max_length=10, description="What was read or tried (1 to 10)."
    )
    limitations: list[text(1, 500, "A limitation.")] = Field(
        max_length=10, description="What was not checked (0 to 10)."
    )
    source_urls: url_list("1 to 10 unique URLs, each one of the task's sources.")
    approval: ContributionApproval


# The largest plain report as sealed JCS text with its salt: 22,000 characters (a summary of 2,000;
# thirty list items and ten URLs of 500) of at most 4 bytes, and under a kilobyte around them.
SEALED_TEXT_MAX_BYTES = 96 * 1024
TAG_BYTES = 16  # AES-GCM's
CIPHERTEXT_MIN_BYTES = NONCE_BYTES + TAG_BYTES
CIPHERTEXT_MAX_BYTES = NONCE_BYTES + SEALED_TEXT_MAX_BYTES + TAG_BYTES
# More keypers than any site lists; a bound so a payload cannot make the server read thousands.
MAX_KEYPERS = 32
B64U_PATTERN = r"^[A-Za-z0-9_-]*$"


def b64u_length(size: int) -> int:
    return (4 * size + 2) // 3


def b64u_bytes(min_bytes: int, max_bytes: int, description: str) -> Any:
    """Binary as base64url without padding (SPEC §15.8), its decoded size bounded."""

    def decodes(value: str) -> str:
        try:
            size = len(b64u_decode(value))
        except ValueError:
            raise ValueError("must be base64url without padding") from None
        if not min_bytes <= size <= max_bytes:
            wanted = f"{min_bytes}" if min_bytes == max_bytes else f"{min_bytes} to {max_bytes}"
            raise ValueError(f"decodes to {size} bytes, not {wanted}")
        return value

    return Annotated[
        str,
        Field(
            min_length=b64u_length(min_bytes),
            max_length=b64u_length(max_bytes),
            pattern=B64U_PATTERN,
            description=description,
        ),
        AfterValidator(decodes),
    ]


Commitment = Annotated[
    Digest,
    Field(
        description=(
            '"sha256:" + hex SHA-256 of JCS({"report_digest", "salt"}): the contributor\'s own '
            "commitment to the sealed report and the salt it made (SPEC §15.2)."
        )
    ),
]


class SealedShare(Payload):
    """One keyper's share of the key, sealed to that keyper alone."""

    keyper: str = Field(
        min_length=1,
        max_length=255,
        pattern=r"^[^\s+]+$",
        description="The keyper's name, as the site lists it (the card's keypers).",
    )
    index: int = Field(
        ge=1,
        le=MAX_KEYPERS,
        description="The share's Shamir index: i for the i-th keyper the site lists, from 1.",
    )
    sealed_share: b64u_bytes(
        SEALED_SHARE_BYTES,
        SEALED_SHARE_BYTES,
        f"HPKE enc ‖ ciphertext of the 16-byte share, {SEALED_SHARE_BYTES} bytes in base64url.",
    )


class SealedApproval(Payload):
    # It names the commitment: the one digest of the report the server sees before the release.
    public_output: bool = Field(
        description="Must be true: the report is published after the deadline."
    )
    scope: str = Field(description=f'Must be "{CONTRIBUTION_SCOPE}".')
    commitment: Commitment


class SealedContributionPayload(Payload):
    """`cairn.task.contribution.sealed/0.1`: a report sealed to the site's keypers (SPEC §15.8)."""

    schema_: Literal["cairn.task.contribution.sealed/0.1"] = Field(alias="schema")
    task_entry: int = Field(
        ge=0,
        le=2**53 - 1,  # exact as a double, as the card's JSON carries it
        description="The index of the task's cairn.log/task entry in the site's log.",
    )
    commitment: Commitment
    ciphertext: b64u_bytes(
        CIPHERTEXT_MIN_BYTES,
        CIPHERTEXT_MAX_BYTES,
        "12-byte nonce ‖ AES-128-GCM of JCS({report, salt}) with its tag, in base64url.",
    )
    shares: list[SealedShare] = Field(
        min_length=1,
        max_length=MAX_KEYPERS,
        description="One share for each keyper the site lists, in the order it lists them.",
    )
    approval: SealedApproval
