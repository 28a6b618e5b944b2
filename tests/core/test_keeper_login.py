"""The keeper's login resists guessing (keeper/logins.py): 40 wrong passwords sent at once
through two `python -m cairn.serve` processes on the test database, from one address behind the
proxy, and at most 5 of them reach the password check; then the lock refuses the right password
too, for that account from anywhere and for any account from that address, with a page that says
why; every attempt is in the audit log; and once the cool-off has passed, the keeper logs in and
the log says so at INFO with the address."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from axes.models import AccessAttempt
from django.contrib.auth import get_user_model

from agents.models import AuditEntry
from tests.deploy.postgres import free_port
from tests.deploy.processes import answering
from tests.grpc.conftest import tests_database_url as database_url

ROOT = Path(__file__).resolve().parents[2]
LOGIN = "/admin/login/"
PASSWORD = "the keeper's long passphrase"
# The client's addresses, as the proxy in front (127.0.0.1, FORWARDED_ALLOW_IPS' default) sends them.
GUESSER, ELSEWHERE, THIRD = "203.0.113.7", "203.0.113.8", "203.0.113.9"
ATTEMPTS = 40
MISTYPED = "correct horse battery staple"


@dataclass
class Web:
    url: str
    process: subprocess.Popen
    log: Path

    def lines(self) -> list[dict]:
        return [
            json.loads(line) for line in self.log.read_text().splitlines() if line.startswith("{")
        ]


@pytest.fixture
def serve(transactional_db, tmp_path) -> Iterator[Callable[..., Web]]:
    """Start `python -m cairn.serve` on the test database with these settings."""
    started: list[Web] = []

    def start(**settings: str) -> Web:
        env = {
            **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DEBUG")},
            "PYTHONUNBUFFERED": "1",
            "DATABASE_URL": database_url(),
            "DEBUG": "false",
            "ALLOWED_HOSTS": "127.0.0.1",
            "CAIRN_LOG_FORMAT": "json",
            **settings,
        }
        port, log = free_port(), tmp_path / f"web-{len(started)}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "cairn.serve", "--port", str(port)],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        web = Web(f"http://127.0.0.1:{port}", process, log)
        started.append(web)
        answering(web.url, process, seconds=60, log=log.read_text)
        return web

    yield start
    for web in started:
        web.process.terminate()
        web.process.wait(timeout=20)


def login(web: Web, username: str, password: str, address: str) -> httpx.Response:
    """The login form sent as a browser sends it, through the proxy that names `address`."""
    with httpx.Client(base_url=web.url, timeout=60) as client:
        client.get(LOGIN)
        token = client.cookies["csrftoken"]
        return client.post(
            LOGIN,
            data={
                "csrfmiddlewaretoken": token,
                "username": username,
                "password": password,
                "next": "/admin/",
            },
            headers={"X-Forwarded-For": address},
        )


def locked(response: httpx.Response) -> bool:
    return response.status_code == 429 and "Too many failed logins" in response.text


def test_guessing_the_keepers_password_stops_after_five_tries(serve):
    users = get_user_model().objects
    users.create_superuser("keeper", "keeper@example.org", PASSWORD)
    users.create_superuser("warden", "warden@example.org", PASSWORD)
    webs = [serve(), serve()]

    # 40 wrong passwords for the keeper from one address, at once, half through each process.
    answers: list[httpx.Response | None] = [None] * ATTEMPTS
    start = threading.Barrier(ATTEMPTS)

    def guess(n: int) -> None:
        start.wait()
        answers[n] = login(webs[n % 2], "keeper", f"guess {n}", GUESSER)

    threads = [threading.Thread(target=guess, args=(n,)) for n in range(ATTEMPTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Five were checked and failed, the fifth setting the lock; the other 35 were refused unchecked.
    assert Counter(answer.status_code for answer in answers) == {200: 4, 429: 36}
    assert sum(AccessAttempt.objects.values_list("failures_since_start", flat=True)) == 5
    lock_page = next(answer for answer in answers if answer.status_code == 429)
    assert locked(lock_page) and lock_page.headers["Retry-After"] == "900"
    assert "locked for 15 minutes" in lock_page.text

    # The right password, for the keeper from another address and for another account from the
    # guesser's, is refused too: the account is locked, and so is the address.
    assert locked(login(webs[0], "keeper", PASSWORD, ELSEWHERE))
    assert locked(login(webs[1], "warden", PASSWORD, GUESSER))
    # Another account from another address is not.
    assert login(webs[0], "warden", PASSWORD, THIRD).status_code == 302
    # A password typed where the name goes is kept in the audit log, never in a log line.
    assert login(webs[1], MISTYPED, "x", THIRD).status_code == 200

    audit = Counter(AuditEntry.objects.filter(door="admin").values_list("operation", "object_id"))
    assert audit == {
        ("keeper_login_failed", "keeper"): 5,
        ("keeper_login_refused", "keeper"): ATTEMPTS - 5 + 1,
        ("keeper_login_refused", "warden"): 1,
        ("keeper_login", "warden"): 1,
        ("keeper_login_failed", MISTYPED): 1,
    }

    # Once the cool-off has passed since the last failure, the lock lifts: the same database,
    # served with a cool-off of one second, which has passed.
    time.sleep(1)
    later = serve(CAIRN_KEEPER_LOCKOUT_S="1")
    welcome = login(later, "keeper", PASSWORD, GUESSER)
    assert welcome.status_code == 302 and welcome.headers["Location"] == "/admin/"
    assert AuditEntry.objects.filter(operation="keeper_login", object_id="keeper").count() == 1
    logged = [line for line in later.lines() if line.get("logger") == "keeper.logins"]
    assert [(line["level"], line["message"]) for line in logged] == [
        ("INFO", f"the keeper keeper logged in from {GUESSER}")
    ]
    # Every failure and refusal was logged as a client's mistake, at INFO, with its address.
    lines = [line for web in webs for line in web.lines()]
    assert not [line for line in lines if line["level"] not in ("INFO", "DEBUG")], lines
    messages = [line["message"] for line in lines if line.get("logger") == "keeper.logins"]
    assert sum(f"as keeper from {GUESSER} failed" in message for message in messages) == 5
    assert f"a keeper login as an unknown account from {THIRD} failed: wrong password" in messages
    assert not [line for line in lines if MISTYPED in json.dumps(line)]
