"""The parity corpus starts the local MCP server the way the MCP door's tests do, and its gRPC
column's server (`python -m cairn.grpc`, a process of its own on the test database) the way the
gRPC tests do."""

from collections.abc import Iterator

import pytest

from tests.grpc.conftest import GrpcServer, running_grpc_server
from tests.mcp.conftest import local_server

__all__ = ["local_server", "parity_grpc_server"]

# The corpus's caps and deadline bounds (its rows refuse at these), as the gRPC process reads
# them: it is another process, so the test's `settings` overrides cannot reach it.
PARITY_SETTINGS = {
    "CAIRN_TASKS_PER_AGENT_PER_DAY": "3",
    "CAIRN_OPEN_TASKS_PER_AGENT": "2",
    "CAIRN_CONTRIBUTIONS_PER_AGENT_PER_DAY": "3",
    "CAIRN_TASK_DEADLINE_MIN_S": "1800",
}


@pytest.fixture(scope="module")
def parity_grpc_server(django_db_setup, tmp_path_factory) -> Iterator[GrpcServer]:
    """One gRPC server for the corpus, under the corpus's caps; stopped before the test database
    is dropped."""
    with running_grpc_server(tmp_path_factory.mktemp("parity-grpc"), **PARITY_SETTINGS) as server:
        yield server
