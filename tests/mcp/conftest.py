"""Fixtures for the MCP doors: the official MCP client over streamable HTTP (hosted `/api/mcp`)
and over stdio (the local `local_mcp/cairn_mcp.py`, spawned as a person's coding agent would)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import time_machine
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings
from django.db import connection
from django.utils import timezone
from mcp import Client, StdioServerParameters

from tasks.models import Task
from tests.factories import (
    contribution_payload,
    contribution_report,
    open_task_payload,
    open_task_request,
)
from tests.ledger.keyper_processes import keyper_site  # noqa: F401  (a fixture)
from tests.ledger.witness_processes import witness_processes, witnessed  # noqa: F401  (fixtures)
from tests.scripts import built

LOCAL_SERVER = Path(django_settings.BASE_DIR) / "local_mcp" / "cairn_mcp.py"
LOCAL_VERSION_CLIENT = "cairn_mcp/0.1.0"


@pytest.fixture
def past_task(make_agent, post_task, contribute):
    """A task posted two hours ago whose deadline passed an hour ago, with the given verdicts;
    the first read evaluates it."""

    def make(verdicts: list[str]) -> Task:
        with time_machine.travel(timezone.now() - timedelta(hours=2), tick=False):
            task = post_task(make_agent(), open_task_payload(open_task_request()))
            for verdict in verdicts:
                contribute(
                    make_agent(), task, contribution_payload(contribution_report(verdict=verdict))
                )
        return task

    return make


@dataclass(frozen=True)
class Answer:
    """A tool's answer: its JSON, and whether it came as an MCP tool error."""

    is_error: bool
    data: Any

    @property
    def code(self) -> str | None:
        return self.data["error"]["code"] if self.is_error else None


async def call(client: Client, name: str, arguments: dict[str, Any] | None = None) -> Answer:
    result = await client.call_tool(name, arguments or {})
    data = json.loads(result.content[0].text)
    if not result.is_error:
        assert result.structured_content == data  # the text mirrors the structured answer
    return Answer(bool(result.is_error), data)


def db(function: Callable[[], Any]) -> Callable[[], Any]:
    """Run a database read from inside an async test (on its own connection, closed after)."""

    def run() -> Any:
        try:
            return function()
        finally:
            connection.close()

    return sync_to_async(run, thread_sensitive=False)


@dataclass(frozen=True)
class LocalServer:
    """How to start `cairn_mcp.py` for one person: their CAIRN_HOME and environment."""

    home: Path
    env: dict[str, str]
    script: Path

    @property
    def params(self) -> StdioServerParameters:
        return StdioServerParameters(command=sys.executable, args=[str(self.script)], env=self.env)


@pytest.fixture
def local_server(live_url: str, tmp_path: Path) -> Callable[..., LocalServer]:
    """`local_server("alice")`: the local server pointed at the live Cairn, with its own CAIRN_HOME."""

    def make(name: str = "home", *, script: Path | None = None, **env: str) -> LocalServer:
        home = tmp_path / name
        environment = {"CAIRN_URL": live_url, "CAIRN_HOME": str(home), **env}
        return LocalServer(
            home=home,
            env={k: v for k, v in environment.items() if v is not None},
            script=script or built(LOCAL_SERVER),
        )

    return make


@asynccontextmanager
async def connected(*servers: LocalServer) -> AsyncIterator[list[Client]]:
    """MCP clients over stdio, one per server, started together."""
    async with AsyncExitStack() as stack:
        clients = [Client(server.params) for server in servers]
        for client in clients:
            await stack.enter_async_context(client)
        yield clients
