"""The verifier and the local MCP server are single files that import nothing of the site, so
each carries a copy of the keyper seal (`ledger/keyper_seal.py`), of the privacy screen
(`core/privacy.py`) and of the rules a sealed report meets when it is opened. These tests hold
both copies to the originals on the same inputs: a report sealed by one opens with the other,
and each rule finds what the site finds."""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from types import ModuleType, SimpleNamespace
from typing import Any

import orjson
import pytest
import rfc8785
from Crypto.Protocol.SecretSharing import Shamir
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from core import privacy
from core.canonical import canonical_digest
from core.errors import Refusal
from core.payloads import parse_payload
from ledger import keyper_seal as site
from ledger.verifier import VERIFIER
from tasks.opening import report_rules_void
from tasks.payloads import CONTRIBUTION_SCHEMA, ContributionPayload
from tasks.rules import contribution_texts, source_in_task_issues
from tests.core.test_privacy import PASSED, REFUSED
from tests.factories import OTHER_SOURCE, SOURCE, contribution_payload, contribution_report
from tests.mcp.conftest import LOCAL_SERVER
from tests.scripts import loaded_script

SITE = "cairn.example/cairn/log"
TASK = "0b6f1a3e-3d0e-4a38-9d5e-2a3c7b8e9f10"
CONTRIBUTION = "6f7c1b2a-9d3e-4c5f-8a1b-2c3d4e5f6a7b"
DEADLINE = "2026-12-04T20:00:00.000Z"
SOURCES = [SOURCE, OTHER_SOURCE]


@pytest.fixture(scope="module", params=["verifier", "local_mcp"])
def copied(request) -> Iterator[ModuleType]:
    """Each single file, loaded as a module as `uv run` loads it (its `main` is not run)."""
    path = VERIFIER if request.param == "verifier" else LOCAL_SERVER
    yield from loaded_script(path, f"copy_under_test_{request.param}")


@pytest.fixture
def keypers() -> list[tuple[site.Keyper, X25519PrivateKey]]:
    keys = [X25519PrivateKey.generate() for _ in range(3)]
    return [
        (site.Keyper(f"k{i}.example/w", site.keyper_public(key), f"https://k{i}.example"), key)
        for i, key in enumerate(keys)
    ]


def _context(payload: dict[str, Any]) -> site.ShareContext:
    return site.ShareContext(
        site=SITE,
        task_id=TASK,
        task_entry=payload["task_entry"],
        deadline=DEADLINE,
        commitment=payload["commitment"],
        ciphertext_digest=site.ciphertext_digest(site.b64u_decode(payload["ciphertext"])),
        threshold=2,
    )


def _released(payload, keypers, which=(0, 1, 2)) -> list[tuple[int, bytes]]:
    """The shares the keypers in `which` open, with the site's own share_open."""
    shares = []
    for n in which:
        sealed, (_, key) = payload["shares"][n], keypers[n]
        opened = site.share_open(
            site.b64u_decode(sealed["sealed_share"]),
            key,
            _context(payload),
            keyper=sealed["keyper"],
            index=sealed["index"],
        )
        shares.append((sealed["index"], opened))
    return shares


def _seal(module, keypers, report, **kwargs):
    listed = [module.Keyper(k.name, k.hpke_key, k.url) for k, _ in keypers]
    return module.seal(
        report,
        site=SITE,
        task_id=TASK,
        task_entry=7,
        deadline=DEADLINE,
        keypers=listed,
        threshold=2,
        **kwargs,
    )


def test_a_report_sealed_by_the_copy_opens_with_the_sites_keypers_and_key(copied, keypers):
    report = contribution_report()
    salt = site.b64u(b"\x07" * 32)

    payload = _seal(copied, keypers, report, salt=salt)

    assert set(payload) == {
        "schema",
        "task_entry",
        "commitment",
        "ciphertext",
        "shares",
        "approval",
    }
    assert payload["schema"] == site.SEALED_SCHEMA
    assert payload["commitment"] == site.commitment_of(canonical_digest(report), salt)
    assert payload["approval"] == {
        "public_output": True,
        "scope": "this_contribution",
        "commitment": payload["commitment"],
    }
    for which in ((0, 1), (1, 2), (0, 2)):
        key = site.key_combine(_released(payload, keypers, which), 2)
        opened = site.report_open(
            site.b64u_decode(payload["ciphertext"]),
            key,
            site=SITE,
            task_id=TASK,
            deadline=DEADLINE,
            commitment=payload["commitment"],
        )
        assert opened == (report, salt)


def test_a_report_sealed_by_the_site_opens_with_the_copy(copied, keypers):
    report = contribution_report(summary="Ünïcode and 1e3 survive the seal exactly as written.")
    payload = site.seal(
        report,
        site=SITE,
        task_id=TASK,
        task_entry=7,
        deadline=DEADLINE,
        keypers=[k for k, _ in keypers],
        threshold=2,
    )
    shares = _released(payload, keypers)

    key = copied.key_combine(shares, 2)
    opened, salt = copied.report_open(
        copied.b64u_decode(payload["ciphertext"]),
        key,
        site=SITE,
        task_id=TASK,
        deadline=DEADLINE,
        commitment=payload["commitment"],
    )

    assert key == site.key_combine(shares, 2)
    assert opened == report
    assert copied.commitment_of(canonical_digest(opened), salt) == payload["commitment"]


def test_what_the_shares_and_the_ciphertext_are_bound_to_is_the_same(copied):
    values = {
        "site": SITE,
        "task_id": TASK,
        "task_entry": 7,
        "deadline": DEADLINE,
        "commitment": "sha256:" + "ab" * 32,
        "ciphertext_digest": "sha256:" + "cd" * 32,
        "threshold": 2,
    }
    binding = {k: values[k] for k in ("site", "task_id", "deadline", "commitment")}

    assert copied.ShareContext(**values).info(keyper="k1", index=2) == site.ShareContext(
        **values
    ).info(keyper="k1", index=2)
    assert copied.report_aad(**binding) == site.report_aad(**binding)
    assert copied.commitment_of("sha256:" + "0" * 64, "c2FsdA") == site.commitment_of(
        "sha256:" + "0" * 64, "c2FsdA"
    )
    assert copied.ciphertext_digest(b"\x00\x01") == site.ciphertext_digest(b"\x00\x01")
    assert (copied.SEALED_SCHEMA, copied.SCHEME) == (site.SEALED_SCHEMA, site.SCHEME)


def _outcome(function, *args, **kwargs) -> Any:
    """What a call gives: its value, or the SealError's or ValueError's message."""
    try:
        return ("value", function(*args, **kwargs))
    except Exception as error:  # noqa: BLE001  (the copies must fail alike, whatever the type)
        return ("error", type(error).__name__, str(error))


def test_combining_shares_fails_alike(copied, keypers):
    payload = _seal(copied, keypers, contribution_report())
    shares = _released(payload, keypers)
    bent = [shares[0], shares[1], (shares[2][0], bytes(b ^ 1 for b in shares[2][1]))]

    for given in (shares, shares[:2], shares[:1], bent, [shares[0], shares[0]], []):
        assert _outcome(copied.key_combine, given, 2) == _outcome(site.key_combine, given, 2)


def test_shares_combine_as_pycryptodomes_shamir_combines_them(copied):
    """SPEC §15.8 names pycryptodome's Shamir; the site and each copy combine without it, and must
    give its secret from any shares: split ones, chosen subsets, and bytes from no split at all."""
    rng = random.Random(15_8)
    for _ in range(60):
        threshold = rng.randint(1, 5)
        shares = Shamir.split(threshold, rng.randint(threshold, 7), rng.randbytes(16))
        chosen = rng.sample(shares, threshold)
        arbitrary = [(index, rng.randbytes(16)) for index in rng.sample(range(256), threshold)]
        for given in (chosen, arbitrary):
            expected = Shamir.combine(given)
            assert site.shamir_combine(given) == copied.shamir_combine(given) == expected


PLAINTEXTS = {
    "a report and its salt": b'{"report":{"a":1},"salt":"c2FsdA"}',
    "NaN": b'{"report":{"a":NaN},"salt":"c2FsdA"}',
    "Infinity": b'{"report":{"a":Infinity},"salt":"c2FsdA"}',
    "a double too large": b'{"report":{"a":1e400},"salt":"c2FsdA"}',
    "an integer beyond 2^53": b'{"report":{"a":1152921504606846976},"salt":"c2FsdA"}',
    "an integer beyond 64 bits": b'{"report":{"a":123456789012345678901234567890},"salt":"s"}',
    "a lone surrogate": b'{"report":{"a":"\\ud800"},"salt":"c2FsdA"}',
    "a surrogate pair": b'{"report":{"a":"\\ud83d\\ude00"},"salt":"c2FsdA"}',
    "bytes that are not UTF-8": b'{"report":{"a":"\xff"},"salt":"c2FsdA"}',
    "a byte order mark": b'\xef\xbb\xbf{"report":{},"salt":"c2FsdA"}',
    "a list": b"[1, 2]",
    "another key": b'{"report":{},"salt":"c2FsdA","more":1}',
    "a salt that is not text": b'{"report":{},"salt":5}',
    "a duplicate key": b'{"report":{"a":1},"report":{"a":2},"salt":"c2FsdA"}',
    "not JSON": b"{report}",
}


@pytest.mark.parametrize("plaintext", PLAINTEXTS.values(), ids=PLAINTEXTS)
def test_a_ciphertext_opens_or_fails_alike(copied, plaintext):
    """Whatever a contributor sealed, both read it as the site does: the same report, or the
    same failure (each is void as invalid_payload)."""
    key, nonce = b"\x01" * 16, b"\x02" * 12
    try:
        parsed = orjson.loads(plaintext)
        commitment = site.commitment_of(canonical_digest(parsed["report"]), parsed["salt"])
    except Exception:  # noqa: BLE001  (no commitment to match: any will do)
        commitment = "sha256:" + "0" * 64
    aad = site.report_aad(site=SITE, task_id=TASK, deadline=DEADLINE, commitment=commitment)
    ciphertext = nonce + AESGCM(key).encrypt(nonce, plaintext, aad)
    binding = {"site": SITE, "task_id": TASK, "deadline": DEADLINE, "commitment": commitment}

    copied_outcome = _outcome(copied.report_open, ciphertext, key, **binding)
    site_outcome = _outcome(site.report_open, ciphertext, key, **binding)

    assert copied_outcome == site_outcome
    assert _outcome(copied.report_open, ciphertext, b"\x03" * 16, **binding) == _outcome(
        site.report_open, ciphertext, b"\x03" * 16, **binding
    )
    other = {**binding, "deadline": "2026-12-04T20:00:00.001Z"}
    assert _outcome(copied.report_open, ciphertext, key, **other) == _outcome(
        site.report_open, ciphertext, key, **other
    )


def test_release_signatures_verify_alike(copied):
    key = Ed25519PrivateKey.generate()
    claims = site.release_claims(
        keyper="k1",
        site=SITE,
        task_id=TASK,
        contribution_id=CONTRIBUTION,
        index=1,
        share=site.b64u(b"\x05" * 16),
        released_at="2026-12-04T20:01:00.000Z",
    )
    signature = site.release_sign(claims, key)
    copied_claims = copied.release_claims(**{k: claims[k] for k in claims})

    assert copied_claims == claims
    assert copied.release_verify(claims, signature, key.public_key()) is True
    for changed in ({**claims, "index": 2}, {**claims, "released_at": DEADLINE}):
        assert copied.release_verify(changed, signature, key.public_key()) is False
    assert copied.release_verify(claims, signature + "A", key.public_key()) is False
    assert copied.release_verify(claims, "not base64!", key.public_key()) is False


@pytest.mark.parametrize("text", ["", "AQ", "AQ==", "AR", "+/8", "-_8", "é", "AQID"])
def test_base64url_is_read_as_strictly(copied, text):
    assert _outcome(copied.b64u_decode, text) == _outcome(site.b64u_decode, text)


@pytest.mark.parametrize("text", [text for text, _ in REFUSED] + PASSED)
def test_the_privacy_screen_finds_what_the_sites_finds(copied, text):
    site_issues = [issue.as_dict() for issue in privacy.screen_text("summary", text)]

    assert copied.screen_text("summary", text) == site_issues


def _site_rules(report: dict[str, Any]) -> str:
    """The first rule the site's own code finds broken in a report it opens (§15.8): its shape
    as `cairn.task.contribution/0.1` with the approval its digest gives, the task's sources,
    the privacy screen."""
    try:
        parsed = parse_payload(
            ContributionPayload, contribution_payload(report), schema=CONTRIBUTION_SCHEMA
        )
    except Refusal as refusal:
        return refusal.code
    if source_in_task_issues(parsed.source_urls, SOURCES):
        return "source_not_in_task"
    if privacy.screen(contribution_texts(parsed)):
        return "private_content"
    return ""


def _without(name: str) -> dict[str, Any]:
    report = contribution_report()
    del report[name]
    return report


REPORTS = {
    "a good report": contribution_report(),
    "another schema": contribution_report(schema="cairn.task.contribution/0.2"),
    "no schema": _without("schema"),
    "no attempts": _without("attempts"),
    "an unknown field": contribution_report(tags=["x"]),
    "another verdict": contribution_report(verdict="source_maybe"),
    "a short summary": contribution_report(summary="too short"),
    "a long summary": contribution_report(summary="x" * 2001),
    "a hidden character": contribution_report(summary="The header is set on every\u202e call."),
    "a tab": contribution_report(summary="The header is set on every\tcall, always."),
    "no attempt": contribution_report(attempts=[]),
    "eleven conditions": contribution_report(conditions=["c"] * 11),
    "an empty limitation": contribution_report(limitations=[""]),
    "a long attempt": contribution_report(attempts=["a" * 501]),
    "a number for a text": contribution_report(summary=12345),
    "a text for a list": contribution_report(conditions="none"),
    "a repeated source": contribution_report(source_urls=[SOURCE, SOURCE]),
    "no source": contribution_report(source_urls=[]),
    "a source outside the task": contribution_report(source_urls=["https://example.org/page"]),
    "a private address": contribution_report(summary="It fails on http://192.168.1.20/ only."),
    "a private attempt": contribution_report(attempts=["ran it as /home/alice/bin/check"]),
    "a token in a condition": contribution_report(
        conditions=["export OPENAI=sk-proj-4f9A8b7C6d5E4f3G2h1I0jKlMn"]
    ),
}


OPENED_REPORTS = {
    **REPORTS,
    "an approval": {**contribution_report(), "approval": {"public_output": True}},
    "a private unknown field": contribution_report(notes="ask alice@example.com"),
    "a private key name": contribution_report(**{"/home/alice/notes": "x"}),
    "a short summary and a private limitation": contribution_report(
        summary="short", limitations=["see /Users/bob/trace.txt"]
    ),
}


@pytest.mark.parametrize("report", REPORTS.values(), ids=REPORTS)
def test_the_local_servers_checks_before_sealing_are_the_sites_at_receipt(report):
    """The local server refuses what the site would refuse of the plain form at receipt."""
    local = next(loaded_script(LOCAL_SERVER, "cairn_mcp_rules_under_test"))
    found, _ = local.report_issues(copy.deepcopy(report), {"state": "open", "sources": SOURCES})

    assert found == _site_rules(report)


@pytest.mark.parametrize("report", OPENED_REPORTS.values(), ids=OPENED_REPORTS)
def test_the_verifiers_rules_of_an_opened_report_are_the_sites_opening(report):
    """The verifier voids what the site's evaluation voids when it opens a sealed report."""
    verifier = next(loaded_script(VERIFIER, "cairn_verify_rules_under_test"))
    void = report_rules_void(copy.deepcopy(report), SimpleNamespace(sources=SOURCES))
    found, _ = verifier.report_rules(copy.deepcopy(report), SOURCES)

    assert found == (void.code if void else "")


def test_a_report_jcs_cannot_write_is_not_opened_anywhere(copied):
    """A report with an integer beyond 2^53 has no canonical form: the site's opening and both
    copies fail it as a seal that does not open (invalid_payload), rather than crashing."""
    plaintext = rfc8785.dumps({"report": {}, "salt": "c2FsdA"}).replace(
        b"{}", b'{"a":9007199254740993}'
    )
    key, nonce = b"\x01" * 16, b"\x02" * 12
    commitment = "sha256:" + "0" * 64
    aad = site.report_aad(site=SITE, task_id=TASK, deadline=DEADLINE, commitment=commitment)
    ciphertext = nonce + AESGCM(key).encrypt(nonce, plaintext, aad)
    binding = {"site": SITE, "task_id": TASK, "deadline": DEADLINE, "commitment": commitment}

    with pytest.raises(site.SealError, match="cannot be written as canonical JSON"):
        site.report_open(ciphertext, key, **binding)
    with pytest.raises(copied.SealError, match="cannot be written as canonical JSON"):
        copied.report_open(ciphertext, key, **binding)
