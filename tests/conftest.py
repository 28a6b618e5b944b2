"""Fixtures shared by every test folder. Data is made through the services, never by hand."""

from __future__ import annotations

import itertools
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn
from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler
from django.core.wsgi import get_wsgi_application
from django.db import connection, connections
from django.dispatch import receiver
from django.test.signals import setting_changed

from a2a_gateway import card
from a2a_gateway.asgi import host_served
from agents.models import Agent, Door
from agents.services import Caller, agent_register
from cairn.serve import uvicorn_options
from tasks.models import Task
from tasks.services import contribution_submit, task_post
from tests.deploy.processes import ROOT, cairn_env
from tests.factories import contribution_payload, open_task_payload

_addresses = itertools.count(1)
TESTS = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`make test` spreads the tests over pytest-xdist's workers (`--dist loadgroup`); the tests
    of a module that share one of its module-scoped fixtures (a server, a deployment, a browser)
    go to one worker together, so that fixture starts once rather than once per worker."""
    for item in items:
        fixtures = getattr(item, "_fixtureinfo", None)
        if fixtures is None:
            continue
        shared = any(
            definition.scope == "module"
            and Path(definition.func.__code__.co_filename).is_relative_to(TESTS)
            for definitions in fixtures.name2fixturedefs.values()
            for definition in definitions
        )
        if shared:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


@receiver(setting_changed)
def _settings_changed(**kwargs: object) -> None:
    """What the site builds once from its settings is built again after a test changes them, as
    Django's own test signals do for its caches."""
    host_served.cache_clear()
    card._built_card.cache_clear()


@dataclass(frozen=True)
class RegisteredAgent:
    agent: Agent
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@pytest.fixture
def make_agent(db) -> Callable[..., RegisteredAgent]:
    """Register a fresh agent, each from its own address so registration limits never bind."""

    def make(label: str = "test agent") -> RegisteredAgent:
        n = next(_addresses)
        agent, token = agent_register(label=label, address=f"198.51.{n // 250}.{n % 250}")
        return RegisteredAgent(agent, token)

    return make


@pytest.fixture
def poster(make_agent) -> RegisteredAgent:
    return make_agent("poster")


@pytest.fixture
def post_task(db) -> Callable[..., Task]:
    def post(by: RegisteredAgent, payload: dict | None = None) -> Task:
        result = task_post(
            Caller(by.agent, str(uuid.uuid4()), Door.HTTP), payload=payload or open_task_payload()
        )
        return Task.objects.get(pk=result.body["task"]["id"])

    return post


@pytest.fixture
def contribute(db) -> Callable[..., dict]:
    def send(by: RegisteredAgent, task: Task, payload: dict | None = None) -> dict:
        return contribution_submit(
            Caller(by.agent, str(uuid.uuid4()), Door.HTTP),
            task_id=task.pk,
            payload=payload or contribution_payload(),
        ).body

    return send


@pytest.fixture(autouse=True)
def _log_state_of_its_own(settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's log starts afresh in an emptied database, so it keeps its promises (SPEC
    §16.2) in a file of its own, as do the processes it starts."""
    settings.CAIRN_LOG_STATE = tmp_path / "log_state.json"
    monkeypatch.setenv("CAIRN_LOG_STATE", str(settings.CAIRN_LOG_STATE))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class _ServerThread(threading.Thread):
    """Cairn's ASGI application under uvicorn, in this process, so it shares the test database
    and any settings a test overrides."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.port = _free_port()
        config = uvicorn.Config(
            "cairn.asgi:application",
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            **uvicorn_options(),
        )
        self.server = uvicorn.Server(config)

    def run(self) -> None:
        self.server.run()

    def start_and_wait(self) -> None:
        self.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.join(timeout=10)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args) -> None:
        pass


class _WsgiServerThread(threading.Thread):
    """Cairn's WSGI application (what gunicorn serves) under Django's threaded WSGI server."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.server = ThreadedWSGIServer(("127.0.0.1", 0), _QuietHandler, allow_reuse_address=False)
        self.server.set_app(get_wsgi_application())
        self.port = self.server.server_address[1]

    def run(self) -> None:
        self.server.serve_forever(poll_interval=0.05)

    def start_and_wait(self) -> None:
        self.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.join(timeout=10)


def _serve(server: _ServerThread | _WsgiServerThread, django_db_blocker) -> Iterator:
    with django_db_blocker.unblock():
        server.start_and_wait()
        yield server
        server.stop()
        # The server's threads borrowed pooled connections: close the pool so the test
        # database can be dropped.
        for wrapper in connections.all():
            if getattr(wrapper, "pool", None) is not None:
                wrapper.close_pool()


@pytest.fixture(scope="session")
def _cairn_server(django_db_setup, django_db_blocker) -> Iterator[_ServerThread]:
    yield from _serve(_ServerThread(), django_db_blocker)


@pytest.fixture(scope="session")
def _cairn_wsgi_server(django_db_setup, django_db_blocker) -> Iterator[_WsgiServerThread]:
    yield from _serve(_WsgiServerThread(), django_db_blocker)


@pytest.fixture
def live_url(_cairn_server: _ServerThread, transactional_db, settings) -> str:
    """The base URL of a live Cairn (uvicorn, ASGI) over the test database."""
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "127.0.0.1", "localhost"]
    return f"http://127.0.0.1:{_cairn_server.port}"


@pytest.fixture
def http(live_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live_url, timeout=20) as client:
        yield client


@pytest.fixture
def short_deadlines(settings) -> None:
    """Tasks may close a second after they are posted, so a test can watch one close."""
    settings.CAIRN_TASK_DEADLINE_MIN_S = 1


@pytest.fixture
def raised_caps(settings) -> None:
    """For tests that need more tasks and contributions than one agent may send in a day."""
    settings.CAIRN_TASKS_PER_AGENT_PER_DAY = 1000
    settings.CAIRN_OPEN_TASKS_PER_AGENT = 1000
    settings.CAIRN_CONTRIBUTIONS_PER_AGENT_PER_DAY = 1000


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory) -> Path:
    """An empty Cairn database, migrated once a session: every process starts from a copy (the
    migrations write nothing that depends on a site's settings), which on a busy machine saves
    a minute per process."""
    database = tmp_path_factory.mktemp("migrated") / "cairn.sqlite3"
    done = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=ROOT,
        env=cairn_env(f"sqlite:///{database}"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return database


def postgres_only(
    reason: str = "row locks and concurrent transactions are only meaningful on PostgreSQL",
) -> pytest.MarkDecorator:
    return pytest.mark.skipif(connection.vendor != "postgresql", reason=reason)
