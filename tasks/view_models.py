"""`task_view`'s schema (`/schemas/a2a/open-task.json`); its request is the posting model's."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from core.clock import INSTANT_PATTERN
from tasks.payloads import ContributionPayload, Digest, OpenTaskRequest, Verdict

UUID_PATTERN = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"

Instant = Annotated[
    str, Field(pattern=INSTANT_PATTERN, description="UTC, YYYY-MM-DDTHH:MM:SS.sssZ.")
]
Uuid = Annotated[str, Field(pattern=UUID_PATTERN, description="A lowercase UUID.")]
Salt = Annotated[
    str,
    Field(
        pattern=r"^[A-Za-z0-9_-]{43}$",
        description="32 random bytes, base64url without padding (absent on contributions made before salts).",
    ),
]
Signature = Annotated[
    str,
    Field(
        description=(
            "A compact JWS (alg EdDSA, kid of a key in /.well-known/jwks.json) whose payload is the "
            "JCS form of this receipt without `signature` (SPEC §15.2)."
        ),
        pattern=r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$",
    ),
]
Outcome = Literal["resolved", "contested", "unresolved"]
OperationId = Annotated[
    str, Field(min_length=1, max_length=200, description="messageId or Idempotency-Key.")
]
KeyperName = Annotated[str, Field(description="The keyper's name: its witness name.")]
ShareIndex = Annotated[int, Field(ge=1, description="The share's index (1-based).")]


class View(BaseModel):
    """What the server shows: exactly these fields, no others."""

    model_config = ConfigDict(extra="forbid", strict=True)


# Built from the payload's own fields, so the two cannot drift.
ContributionReport = create_model(  # type: ignore[call-overload]  # fields from another model
    "ContributionReport",
    __base__=View,
    __doc__="A revealed report: the contribution payload exactly as sent, without its `approval`.",
    **{
        name: (field.annotation, field)
        for name, field in ContributionPayload.model_fields.items()
        if name != "approval"
    },
)


class VerdictCounts(View):
    source_supported: Annotated[int, Field(ge=0)]
    source_contradicted: Annotated[int, Field(ge=0)]
    source_unclear: Annotated[int, Field(ge=0)]


class RevealedContribution(View):
    contribution_id: Uuid
    received_at: Instant
    report_digest: Digest = Field(description="sha256 of the RFC 8785 canonical `report`.")
    salt: Salt | None = Field(
        default=None,
        description="The receipt's salt; with `report_digest` it gives the logged commitment (§15.2).",
    )
    report: ContributionReport


class Release(View):
    """A keyper's signed release of its share of a sealed report's key (SPEC §15.8)."""

    keyper: KeyperName
    index: ShareIndex
    share: str = Field(description="The 16 share bytes, base64url without padding.")
    released_at: Instant
    signature: str = Field(
        description=(
            "Ed25519 by the keyper's witness key over JCS of {keyper, site, task_id, "
            "contribution_id, index, share, released_at}, base64url."
        )
    )


class SealedShare(View):
    """One keyper's share of a sealed report's key, sealed to it with HPKE (SPEC §15.8)."""

    keyper: KeyperName
    index: ShareIndex
    sealed_share: str = Field(description="base64url of HPKE enc and ciphertext of the share.")


class SealedEnvelope(View):
    ciphertext: str | None = Field(
        default=None,
        description=(
            "base64url: nonce and AES-128-GCM of JCS({report, salt}); absent on a report void for "
            "private content."
        ),
    )
    ciphertext_digest: Digest
    threshold: Annotated[int, Field(ge=1, description="The releases needed to open it (k).")]
    shares: list[SealedShare] | None = Field(
        default=None,
        description=(
            "The shares as sealed to the keypers, so anyone can ask a keyper for its release; "
            "absent on a report void for private content."
        ),
    )
    releases: list[Release] | None = Field(
        default=None,
        description="Every release collected, by index; absent on a report void for private content.",
    )


class VoidReason(View):
    code: str = Field(
        description="The rule's code (SPEC §6), or keys_unavailable or inconsistent_shares."
    )
    message: str


class KeyperSealedContribution(View):
    """A contribution sealed to the keypers (SPEC §15.8): its envelope and releases, then its report
    as a plain item has it, or why it is void (counted in no verdict)."""

    contribution_id: Uuid
    received_at: Instant
    commitment: Digest = Field(description="The contributor's commitment, as logged.")
    sealed: SealedEnvelope
    report_digest: Digest | None = None
    salt: Salt | None = None
    report: ContributionReport | None = None
    void: VoidReason | None = None


class Evaluation(View):
    """`cairn.evaluation/0.1` (SPEC §4.3): a summary of participant reports, not a certificate of
    truth. `counts`, `outcome` and `verdict` are over the contributions that are not void."""

    schema_: Literal["cairn.evaluation/0.1"] = Field(alias="schema")
    rule: Literal["cairn.rules/0.1"]
    outcome: Outcome
    verdict: Verdict | None = Field(description="The agreed verdict when resolved, else null.")
    evaluated_at: Instant
    min_independent: Annotated[int, Field(ge=2, le=5)]
    counts: VerdictCounts
    contributions: list[RevealedContribution | KeyperSealedContribution] = Field(
        description="Every contribution, in the order received."
    )


class TaskView(OpenTaskRequest):
    """The public view of a task (SPEC §3.2): the same fields on every door. No agent id, no sealed content."""

    model_config = ConfigDict(extra="forbid", strict=True, title="OpenTaskView")

    id: Uuid = Field(description="The task id (A2A Task.id and contextId).")
    public_input_digest: Digest = Field(
        description='"sha256:" + hex SHA-256 of JCS of the eight request fields, exactly as shown here.'
    )
    created_at: Instant
    state: Literal["open", "evaluated"]
    contributions_received: Annotated[
        int, Field(ge=0, le=10, description="The count of sealed contributions.")
    ]
    outcome: Outcome | None = Field(description="Null until evaluated.")
    verdict: Verdict | None = Field(description="The agreed verdict when resolved, else null.")
    evaluated_at: Instant | None
    evaluation: Evaluation | None = Field(description="Null until evaluated (SPEC §4.3).")


class Receipt(View):
    """What a contributor gets back (SPEC §4.2)."""

    contribution_id: Uuid
    task_id: Uuid
    operation_id: OperationId
    report_digest: Digest
    salt: Salt | None = Field(
        default=None,
        description=(
            "32 random bytes (base64url) made by the server: the log shows only the commitment "
            "sha256(JCS({report_digest, salt})) until the evaluation publishes the salt (§15.2)."
        ),
    )
    received_at: Instant
    sealed_until: Instant = Field(description="The task's deadline.")
    signature: Signature


class KeyperReceipt(View):
    """What the contributor of a keyper-sealed report gets back (SPEC §15.8): its own commitment
    and the digest of its ciphertext, in place of the report digest and salt the server has not
    got."""

    contribution_id: Uuid
    task_id: Uuid
    operation_id: OperationId
    commitment: Digest = Field(
        description="The contributor's commitment, as its payload gave it and the log shows it."
    )
    ciphertext_digest: Digest = Field(
        description='"sha256:" + hex SHA-256 of the ciphertext\'s bytes.'
    )
    sealed: Literal["keypers"] = Field(
        description="The report is sealed to the site's keypers, not held by the server."
    )
    received_at: Instant
    sealed_until: Instant = Field(description="The task's deadline.")
    signature: Signature
