"""Fixtures of the core's tests that live with another folder's."""

from tests.ledger.witness_processes import witness_processes, witnessed  # noqa: F401  (fixtures)
