"""The offline verifier is built only from modules that need no Django, and the payload models
that name the request fields and the verdicts do, so it states them again. These tests hold its words to the server's: a field or verdict added
to the payloads fails here until the verifier checks it too."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest

from ledger.verifier import VERIFIER
from tasks.payloads import VERDICTS, OpenTaskRequest
from tests.scripts import loaded_script


@pytest.fixture(scope="module")
def verifier() -> Iterator[ModuleType]:
    """`cairn_verify.py` loaded as a module (its `main` is not run)."""
    yield from loaded_script(VERIFIER, "cairn_verify_under_test")


def test_it_recomputes_the_digest_over_the_fields_the_server_approves(verifier):
    assert verifier.REQUEST_FIELDS == tuple(OpenTaskRequest.model_fields)


def test_it_counts_the_verdicts_the_server_counts(verifier):
    assert verifier.VERDICTS == VERDICTS
