"""Fixtures for the web door: tasks in each state, made through the services, and a real Chromium.

Playwright's sync API keeps an event loop running in the test thread, which Django would take for an
async context; the browser fixture allows the ORM there only while a browser module runs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Browser, Page, sync_playwright

from tasks.models import Task
from tests.factories import contribution_payload, deadline_in, open_task_payload, open_task_request

CHROMIUM = os.environ.get("CAIRN_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
PHONE = {"width": 375, "height": 812}
DESKTOP = {"width": 1280, "height": 900}


@dataclass
class PostedTask:
    task: Task
    receipts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def id(self) -> str:
        return str(self.task.pk)

    def wait_past_deadline(self) -> None:
        """Sleep until the deadline has passed; the next read of the task evaluates it."""
        remaining = (self.task.deadline - timezone.now()).total_seconds()
        if remaining > -0.05:
            time.sleep(remaining + 0.1)


@pytest.fixture
def task_with(make_agent, post_task, contribute, short_deadlines) -> Callable[..., PostedTask]:
    """Post a task (a fresh poster each time) and send the given reports, each from a fresh agent."""

    def build(
        *, reports: tuple[dict, ...] = (), deadline_s: float = 3600, poster=None, **changes
    ) -> PostedTask:
        request = open_task_request(deadline=deadline_in(deadline_s), **changes)
        task = post_task(poster or make_agent(), open_task_payload(request))
        receipts = [
            contribute(make_agent(), task, contribution_payload(report))["receipt"]
            for report in reports
        ]
        task.refresh_from_db()
        return PostedTask(task, receipts)

    return build


# --- the browser ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"{CHROMIUM} is missing: install Debian's chromium package (apt-get install -y chromium)"
        )
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield chromium
            chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@dataclass
class Tab:
    """A page plus everything it reported: console errors (CSP violations show up there) and dialogs."""

    page: Page
    console_errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def screenshot(self, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def scroll_width(self) -> int:
        return self.page.evaluate("document.documentElement.scrollWidth")


@pytest.fixture
def open_tab(browser, live_url) -> Iterator[Callable[..., Tab]]:
    contexts = []

    def make(*, viewport=PHONE, color_scheme="light", javascript=True) -> Tab:
        context = browser.new_context(
            base_url=live_url,
            viewport=viewport,
            color_scheme=color_scheme,
            java_script_enabled=javascript,
        )
        contexts.append(context)
        tab = Tab(context.new_page())
        tab.page.on(
            "console",
            lambda message: message.type == "error" and tab.console_errors.append(message.text),
        )
        tab.page.on("pageerror", lambda error: tab.console_errors.append(str(error)))

        def on_dialog(dialog):
            tab.dialogs.append(dialog.message)
            dialog.dismiss()

        tab.page.on("dialog", on_dialog)
        return tab

    yield make
    for context in contexts:
        context.close()
