"""The web pages in a real browser (Debian's Chromium through Playwright), against the live server."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model

from agents.models import Door
from agents.services import Caller
from calls.services import call_answer, call_create
from tasks.evaluation import tasks_evaluate_due
from tests.factories import OTHER_SOURCE, SOURCE, contribution_report
from tests.web.conftest import DESKTOP, PHONE

LONG_SOURCE = "https://github.com/a2aproject/a2a-js/blob/main/src/" + "x" * 180 + ".ts"
XSS_TITLE = "<script>alert(1)</script> title"


def _supported(**changes):
    return contribution_report(
        summary=(
            "The transport sets A2A-Version from A2A_PROTOCOL_VERSION ('1.0') on every call; "
            "see json_rpc_transport.ts, function _fetchRpc, which builds the headers for each request."
        ),
        **changes,
    )


def test_feed_to_task_and_back_without_javascript(open_tab, task_with):
    # Given an open task that closes in 2 h 14 min (and some seconds)
    posted = task_with(
        deadline_s=2 * 3600 + 14 * 60 + 40, title="Does the JSON-RPC transport set A2A-Version?"
    )
    tab = open_tab(javascript=False)

    # When a reader opens the feed and follows the task's title
    tab.page.goto("/a2a")
    card = tab.page.locator(
        "article.task-card", has_text="Does the JSON-RPC transport set A2A-Version?"
    )
    assert card.locator(".time-left").inner_text() == "closes in 2 h 14 min"
    assert card.locator(".contributions").inner_text() == "0 / 3 contributions"
    card.get_by_role("link", name="Does the JSON-RPC transport set A2A-Version?").click()

    # Then the task page shows the public view with the countdown rendered by the server
    assert tab.page.url.endswith(f"/a2a/tasks/{posted.id}")
    assert tab.page.title() == "Does the JSON-RPC transport set A2A-Version? · Cairn"
    assert tab.page.locator(".task-head .time-left").inner_text() == "closes in 2 h 14 min"
    deadline = tab.page.locator("dl.facts time").first
    assert deadline.get_attribute("datetime") == posted.task.deadline_text
    assert tab.page.get_by_text("Contributions are sealed").is_visible()

    # And back returns to the feed
    tab.page.go_back()
    assert tab.page.url.endswith("/a2a")
    assert tab.page.get_by_role("heading", name="Source-review tasks").is_visible()


def test_evaluated_task_shows_outcome_and_every_contribution(open_tab, task_with):
    # Given a task two agents contributed to with the same verdict, whose deadline has passed
    posted = task_with(deadline_s=1.2, reports=(_supported(), _supported(conditions=[])))
    posted.wait_past_deadline()
    tab = open_tab(viewport=DESKTOP)

    # When the feed is read (which evaluates it) and the task opened
    tab.page.goto("/a2a?mode=evaluated")
    card = tab.page.locator("article.task-card").first
    assert card.locator(".badge").inner_text() == "Resolved"
    assert card.locator(".verdict").inner_text() == "Source supported"
    card.locator("h2 a").click()

    # Then the outcome, the counts and every contribution with its report digest are shown
    assert tab.page.locator(".outcome .badge").inner_text() == "Resolved"
    assert tab.page.locator(".outcome .verdict").inner_text() == "Source supported"
    contributions = tab.page.locator("article.contribution")
    assert contributions.count() == 2
    for receipt, contribution in zip(posted.receipts, contributions.all(), strict=True):
        assert contribution.locator(".digest").inner_text() == receipt["report_digest"]
    assert tab.page.get_by_text("JSON Canonicalization Scheme").is_visible()
    counts = tab.page.locator(".counts-table tbody tr").all_inner_texts()
    assert [re.sub(r"\s+", " ", row).strip() for row in counts] == [
        "Source supported 2",
        "Source contradicted 0",
        "Source unclear 0",
    ]
    for time_element in tab.page.locator("main time").all():
        assert re.fullmatch(
            r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", time_element.get_attribute("datetime")
        )
    tab.screenshot("task-evaluated-desktop-light")


def test_unresolved_and_contested_outcomes_read_as_text(open_tab, task_with):
    unresolved = task_with(deadline_s=1.2, reports=(_supported(),))
    contested = task_with(
        deadline_s=1.2, reports=(_supported(), _supported(verdict="source_contradicted"))
    )
    contested.wait_past_deadline()
    tab = open_tab()

    tab.page.goto(f"/a2a/tasks/{unresolved.id}")
    assert tab.page.locator(".outcome .badge").inner_text() == "Unresolved"
    tab.page.goto(f"/a2a/tasks/{contested.id}")
    assert tab.page.locator(".outcome .badge").inner_text() == "Contested"
    assert tab.page.locator(".outcome .verdict").count() == 0


def test_script_in_a_title_is_shown_as_text(open_tab, task_with):
    # Given a task whose title is markup
    posted = task_with(title=XSS_TITLE)
    tab = open_tab()

    # When the feed and the task page are shown with JavaScript on
    tab.page.goto("/a2a")
    feed_title = tab.page.locator("article.task-card h2").first.inner_text()
    tab.page.goto(f"/a2a/tasks/{posted.id}")

    # Then the markup is visible text and nothing ran
    assert feed_title == XSS_TITLE
    assert tab.page.locator("h1").inner_text() == XSS_TITLE
    assert tab.page.get_by_text(XSS_TITLE).first.is_visible()
    assert tab.page.title() == f"{XSS_TITLE} · Cairn"
    assert tab.dialogs == []
    assert tab.page.locator("main script").count() == 0


@pytest.mark.parametrize("color_scheme", ["light", "dark"])
def test_every_page_fits_a_phone_and_keeps_to_the_policy(
    open_tab, task_with, make_agent, color_scheme
):
    # Given content of every kind, with long unbroken text
    call = call_create(
        title="What should Cairn review next?",
        body="Name one public source worth a source-review task, and say why.\n\nOne answer per agent.",
        kind="feedback",
    )
    call_answer(
        Caller(make_agent().agent, "answer-1", Door.HTTP),
        call_id=call.id,
        payload={
            "schema": "cairn.call.response/0.1",
            "stance": "support",
            "body": "The Node.js fetch documentation: " + "y" * 120,
            "public_output_approved": True,
        },
    )
    long_sources = [SOURCE, OTHER_SOURCE, LONG_SOURCE]
    evaluated = task_with(
        deadline_s=1.2,
        sources=long_sources,
        reports=(_supported(source_urls=[LONG_SOURCE]), _supported(verdict="source_unclear")),
    )
    opened = task_with(title="Which " + "z" * 120 + " is it?", sources=long_sources)
    evaluated.wait_past_deadline()
    pages = {
        "feed": "/a2a",
        "feed-open": "/a2a?mode=open",
        "task-open": f"/a2a/tasks/{opened.id}",
        "task-evaluated": f"/a2a/tasks/{evaluated.id}",
        "calls": "/a2a/calls",
        "call": f"/a2a/calls/{call.id}",
        "join": "/a2a/join",
        "not-found": "/a2a/tasks/00000000-0000-0000-0000-000000000000",
    }
    tab = open_tab(viewport=PHONE, color_scheme=color_scheme)

    for name, path in pages.items():
        tab.console_errors.clear()
        response = tab.page.goto(path)
        assert response.status == (404 if name == "not-found" else 200), name
        # When it is shown 375 px wide, then nothing scrolls sideways
        assert tab.scroll_width() <= 375, name
        assert tab.page.title().endswith("· Cairn"), name
        assert response.headers["content-security-policy"].startswith("default-src 'self'")
        tab.screenshot(f"{name}-phone-{color_scheme}")
        # And nothing broke the CSP or failed to load (the 404 page reports only its own status)
        expected = ["404 (Not Found)"] if name == "not-found" else []
        assert [error[-15:] for error in tab.console_errors] == expected, name
    assert tab.dialogs == []


# Where each row's dots fall: a dot between two items on one line must show; the dot of an item
# that starts a wrapped line must be clipped, so none is left at a line's end or start.
DOTS = """() => {
  const wrong = []; let wrapped = 0; let shown = 0;
  for (const row of document.querySelectorAll('.dotted')) {
    const box = row.getBoundingClientRect();
    const items = [...row.children];
    items.forEach((item, i) => {
      const dot = getComputedStyle(item, '::before');
      if (i === 0 || dot.content === 'none' || dot.content === 'normal') return;
      const r = item.getBoundingClientRect(), prev = items[i - 1].getBoundingClientRect();
      const left = r.left + parseFloat(dot.left), right = left + parseFloat(dot.width);
      const sameLine = prev.bottom > r.top && prev.right <= left + 0.5;
      if (sameLine) { shown++; if (left < box.left - 0.5) wrong.push('hidden: ' + item.innerText); }
      else { wrapped++; if (right > box.left + 0.5) wrong.push('dangling: ' + item.innerText); }
    });
  }
  return {wrong, wrapped, shown};
}"""


def test_no_dot_dangles_where_a_row_of_facts_wraps(open_tab, task_with):
    # Given open and evaluated tasks and an open call, whose rows of facts wrap on narrow screens
    task_with(title="Does the JSON-RPC transport set A2A-Version?")
    evaluated = task_with(deadline_s=1.2, reports=(_supported(), _supported()))
    call_create(title="What should Cairn review next?", body="Name one source.", kind="feedback")
    evaluated.wait_past_deadline()

    wrapped = 0
    for width in (320, 375, 600, 1280):
        tab = open_tab(viewport={"width": width, "height": 900})
        for path in ("/a2a", "/a2a/calls"):
            tab.page.goto(path)
            # When the rows are laid out at this width, then dots sit only between neighbours
            dots = tab.page.evaluate(DOTS)
            assert dots["wrong"] == [], (width, path, dots)
            assert dots["shown"] > 0 or width < 1280, (width, path)
            wrapped += dots["wrapped"]
    assert wrapped > 0  # some row did wrap, so the clipped case was seen


def test_a_feed_card_on_a_phone_is_a_compact_summary(open_tab, task_with):
    # Given seven open tasks, each with a long question, three sources and two criteria
    question = "Read the client transport source and say whether every request carries it. " * 6
    for n in range(7):
        task_with(
            title=f"Task {n} about the A2A transport",
            question=question.strip(),
            sources=[SOURCE, OTHER_SOURCE, LONG_SOURCE],
        )
    tab = open_tab(viewport=PHONE)

    # When the feed is shown on a phone
    tab.page.goto("/a2a")
    cards = tab.page.locator("article.task-card")

    # Then each card is a short summary: the question cut to three lines, no source list
    tab.screenshot("feed-phone-compact")
    assert cards.count() == 7
    heights = [card.bounding_box()["height"] for card in cards.all()]
    assert max(heights) < 340, heights
    first = cards.first
    assert not first.locator(".card-columns").is_visible()
    assert first.locator(".sources-count").inner_text() == "3 sources"
    assert first.locator(".question").bounding_box()["height"] < 4 * 24
    # And the task page still shows every source
    first.locator("h2 a").click()
    assert tab.page.locator("main a[rel~='nofollow']").count() >= 3 or (
        tab.page.get_by_text(LONG_SOURCE).is_visible()
    )


def test_desktop_screenshots(open_tab, task_with):
    task_with(title="Does docs.python.org say json.dumps sorts keys by default?")
    backgrounds = {}
    for scheme in ("light", "dark"):
        tab = open_tab(viewport=DESKTOP, color_scheme=scheme)
        tab.page.goto("/a2a")
        tab.screenshot(f"feed-desktop-{scheme}")
        backgrounds[scheme] = tab.page.evaluate("getComputedStyle(document.body).backgroundColor")
        tab.page.goto("/a2a/join")
        tab.screenshot(f"join-desktop-{scheme}")
        assert tab.console_errors == []
    # The page follows the reader's colour scheme
    assert backgrounds == {"light": "rgb(247, 246, 242)", "dark": "rgb(20, 22, 25)"}


def _keeper_tab(open_tab, settings):
    """A desktop tab logged in as the keeper."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    get_user_model().objects.create_superuser(
        "keeper", "keeper@example.org", "a long keeper password"
    )
    tab = open_tab(viewport=DESKTOP)
    tab.page.goto("/admin/login/")
    tab.page.fill("#id_username", "keeper")
    tab.page.fill("#id_password", "a long keeper password")
    tab.page.click("input[type=submit]")
    tab.page.wait_for_url("**/admin/")
    return tab


def test_admin_works_under_the_content_security_policy(open_tab, task_with, settings):
    # Given a keeper account and a task
    posted = task_with()

    # When the keeper logs in and opens the task list and a task
    tab = _keeper_tab(open_tab, settings)
    tab.page.goto("/admin/tasks/task/")
    tab.page.goto(f"/admin/tasks/task/{posted.id}/change/")
    tab.page.goto("/admin/calls/call/add/")

    # Then the pages load with nothing refused by the policy
    assert tab.page.locator("#content").is_visible()
    assert [error for error in tab.console_errors if "Content Security Policy" in error] == []


# How a change list lays out: how far the table overflows its box, the narrowest title cell, and
# every cell whose content is cut off.
ADMIN_LAYOUT = """() => {
  const box = document.querySelector('.results');
  const titles = [...document.querySelectorAll('#result_list td.field-title, #result_list .cell-text')];
  const clipped = [...document.querySelectorAll('#result_list td, #result_list th')]
    .filter((cell) => cell.scrollWidth > cell.clientWidth + 1).map((cell) => cell.className);
  return {
    overflow: box.scrollWidth - box.clientWidth,
    titleWidth: Math.min(...titles.map((cell) => cell.getBoundingClientRect().width)),
    clipped,
  };
}"""


def test_the_keepers_lists_read_at_1280_px(open_tab, task_with, make_agent, settings):
    # Given tasks with long titles, a contribution, an open call and an audit log
    title = "Does the Node.js fetch documentation promise that redirects are followed by default?"
    task_with(title=title, reports=(_supported(),))
    task_with(deadline_s=1.2, title=title + " (evaluated)", reports=(_supported(), _supported()))
    call_create(title="What should Cairn review next?", body="Name one source.", kind="feedback")

    # When the keeper opens each list on a 1280 px screen
    tab = _keeper_tab(open_tab, settings)
    for name in (
        "tasks/task",
        "tasks/contribution",
        "agents/agent",
        "agents/auditentry",
        "calls/call",
    ):
        tab.page.goto(f"/admin/{name}/")
        layout = tab.page.evaluate(ADMIN_LAYOUT)
        tab.screenshot("admin-" + name.replace("/", "-") + "-1280")

        # Then nothing is cut off or scrolls sideways, and a title has room for several words a line
        assert layout["overflow"] <= 0, (name, layout)
        assert layout["clipped"] == [], (name, layout)
        assert layout["titleWidth"] >= 190, (name, layout)
        assert " UTC" in tab.page.locator("#result_list").inner_text(), name
    assert tab.page.title() == "Select call to change | Cairn keeper"


# Every code block on a page, the reports' folded ones unfolded: whether it lies inside the screen,
# whether any of its lines wrapped or may break inside a word (a command or a digest broken in two
# reads wrong, so none may; the text to paste to an agent is prose, wrapped between words), and
# whether a block wider than its box scrolls sideways to its end rather than cutting lines off.
CODE_BLOCKS = """() => {
document.querySelectorAll('details').forEach((details) => { details.open = true; });
return [...document.querySelectorAll('pre')].map((pre) => {
  const box = pre.getBoundingClientRect();
  const style = getComputedStyle(pre);
  const lines = pre.innerText.replace(/\\n$/, '').split('\\n').length;
  const inner = pre.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
  const overflows = pre.scrollWidth > pre.clientWidth + 1;
  pre.scrollLeft = pre.scrollWidth;
  const reached = pre.scrollLeft + pre.clientWidth >= pre.scrollWidth - 1;
  pre.scrollLeft = 0;
  const code = getComputedStyle(pre.querySelector('code') || pre);
  return {
    text: pre.innerText.slice(0, 40),
    prose: pre.classList.contains('paste'),
    report: Boolean(pre.closest('details')),
    breaksWords: code.overflowWrap !== 'normal' || code.wordBreak !== 'normal',
    inside: box.left >= -0.5 && box.right <= window.innerWidth + 0.5,
    wrapped: Math.round(inner / parseFloat(style.lineHeight)) > lines,
    overflows,
    reached,
  };
});
}"""


def _code_pages(call_id, opened_id, evaluated_id) -> list[str]:
    return [
        "/a2a",
        "/a2a/calls",
        f"/a2a/calls/{call_id}",
        f"/a2a/tasks/{opened_id}",
        f"/a2a/tasks/{evaluated_id}",
        "/a2a/join",
        "/a2a/no-such-page",
    ]


@pytest.mark.parametrize("width", [320, 375, 1280])
def test_no_code_block_breaks_a_line_and_a_wide_one_scrolls_to_its_end(
    open_tab, task_with, settings, width
):
    # Given pages with code blocks: a call's curl command, a task's verify command and digest
    # snippet, the join page's commands
    call = call_create(title="What should Cairn review next?", body="Name one.", kind="feedback")
    opened = task_with()
    evaluated = task_with(deadline_s=1.2, reports=(_supported(), _supported()))
    evaluated.wait_past_deadline()
    settings.DEBUG = True
    tab = open_tab(viewport={"width": width, "height": 800})

    seen = 0
    for path in _code_pages(call.id, opened.id, evaluated.id):
        response = tab.page.goto(path)
        assert response.status == (404 if "no-such" in path else 200), path
        # When the page is shown `width` px wide, then no line of any code block wraps, and the
        # text to paste to an agent (prose) wraps only between words
        blocks = tab.page.evaluate(CODE_BLOCKS)
        wrapped = [b for b in blocks if (b["wrapped"] and not b["prose"]) or b["breaksWords"]]
        assert wrapped == [], (path, blocks)
        assert [b for b in blocks if not b["inside"]] == [], (path, blocks)
        # And a block wider than the screen scrolls sideways to its end, inside its own box
        assert [b for b in blocks if b["overflows"] and not b["reached"]] == [], (path, blocks)
        assert tab.scroll_width() <= width, path
        # And on a desktop the task page's own blocks (not the reports agents wrote) show whole
        if width == 1280 and "/tasks/" in path:
            assert [b for b in blocks if b["overflows"] and not b["report"]] == [], (path, blocks)
        tab.screenshot(f"code-{path.strip('/').replace('/', '-')[:40]}-{width}")
        seen += len(blocks)
    assert seen >= 5


def test_under_debug_an_unknown_page_is_the_branded_404(open_tab, settings):
    # Given the server runs as `make run` runs it, with DEBUG
    settings.DEBUG = True
    tab = open_tab()

    # When a reader opens an address under /a2a/ that does not exist
    response = tab.page.goto("/a2a/tasks/x/nothing")

    # Then it is Cairn's own 404 page, not Django's list of every route
    assert response.status == 404
    assert tab.page.title() == "Not found · Cairn"
    assert tab.page.get_by_text("Nothing lives at this address.").is_visible()
    assert "URLconf" not in tab.page.content() and tab.scroll_width() <= 375


# How a keeper's page lays out: how far the page itself overflows the screen, and every element
# whose box reaches past the screen's right edge without a box of its own that scrolls.
ADMIN_PAGE = """() => {
  const width = window.innerWidth;
  const scrolls = (el) => { for (let e = el; e; e = e.parentElement) {
    const o = getComputedStyle(e).overflowX;
    if ((o === 'auto' || o === 'scroll') && e !== document.documentElement && e !== document.body) return true;
  } return false; };
  const past = [...document.querySelectorAll('#content *')]
    .filter((el) => el.getBoundingClientRect().right > width + 1 && !scrolls(el))
    .map((el) => el.tagName + '.' + el.className);
  return {overflow: document.documentElement.scrollWidth - width, past};
}"""


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "375"])
def test_the_keepers_task_page_reads_like_the_public_one(open_tab, task_with, settings, viewport):
    # Given an open task with one sealed contribution, and an evaluated one with two
    marker = "Sealed marker k3q7: the header is set on every request by _fetchRpc."
    opened = task_with(
        sources=[SOURCE, LONG_SOURCE], reports=(contribution_report(summary=marker),)
    )
    evaluated = task_with(
        deadline_s=1.2,
        sources=[SOURCE, LONG_SOURCE],
        reports=(_supported(), _supported(verdict="source_contradicted")),
    )
    evaluated.wait_past_deadline()
    tasks_evaluate_due()  # what the worker does at the deadline
    tab = _keeper_tab(open_tab, settings)
    tab.page.set_viewport_size(viewport)
    name = f"{viewport['width']}"

    # When the keeper opens the open task
    tab.page.goto(f"/admin/tasks/task/{opened.id}/change/")
    tab.screenshot(f"admin-task-open-{name}")
    page = tab.page.locator("#content")

    # Then sources are links, criteria a list, the public page one click away, nothing sealed shown
    assert page.locator(f".field-source_links a[href='{LONG_SOURCE}']").count() == 1
    assert page.locator(".field-criteria ol li").count() >= 1
    assert page.locator(".field-public_page a").get_attribute("href") == f"/a2a/tasks/{opened.id}"
    assert "k3q7" not in page.inner_text() and "source supported" not in page.inner_text()
    assert page.locator(".cairn-evaluation tr.sealed").count() == 1
    assert opened.receipts[0]["report_digest"] not in tab.page.content()
    layout = tab.page.evaluate(ADMIN_PAGE)
    assert layout["overflow"] <= 0 and layout["past"] == [], layout

    # When the keeper opens the evaluated task
    tab.page.goto(f"/admin/tasks/task/{evaluated.id}/change/")
    tab.screenshot(f"admin-task-evaluated-{name}")
    rows = page.locator(".cairn-evaluation tbody tr")

    # Then the evaluation is a table of contributions: verdict, digest, received, the report
    assert rows.count() == 2
    for receipt, row in zip(evaluated.receipts, rows.all(), strict=True):
        assert receipt["report_digest"] in row.inner_text()
        assert " UTC" in row.inner_text()
        assert "_fetchRpc" in row.locator(".cairn-report").inner_text()
    verdicts = [row.locator("td").nth(1).inner_text() for row in rows.all()]
    assert verdicts == ["source supported", "source contradicted"]
    assert "evaluated: contested" in page.inner_text()
    layout = tab.page.evaluate(ADMIN_PAGE)
    assert layout["overflow"] <= 0 and layout["past"] == [], layout


def test_the_keepers_lists_are_usable_at_375_px(open_tab, task_with, settings):
    # Given a task with a long title and a contribution, and an open call
    title = "Does the Node.js fetch documentation promise that redirects are followed by default?"
    task_with(title=title, reports=(_supported(),))
    call_create(title="What should Cairn review next?", body="Name one source.", kind="feedback")
    tab = _keeper_tab(open_tab, settings)
    tab.page.set_viewport_size(PHONE)

    for name in (
        "tasks/task",
        "tasks/contribution",
        "agents/agent",
        "agents/auditentry",
        "calls/call",
    ):
        # When the keeper opens each list on a phone
        tab.page.goto(f"/admin/{name}/")
        tab.screenshot("admin-" + name.replace("/", "-") + "-375")
        layout = tab.page.evaluate(ADMIN_PAGE)

        # Then the page does not scroll sideways: only the table scrolls, inside its own box,
        # and a row's first two columns show without scrolling
        assert layout["overflow"] <= 0 and layout["past"] == [], (name, layout)
        cells = tab.page.locator("#result_list tbody tr").first.locator("th, td")
        second = cells.nth(2 if cells.first.locator("input").count() else 1).bounding_box()
        assert second["x"] + second["width"] <= 375, (name, second)


# The keeper's header, element by element: the site's name, the theme toggle and the user links;
# which overlap, and the room between the name and the toggle when they share a line.
ADMIN_HEADER = """(rootFontSize) => {
  document.documentElement.style.fontSize = rootFontSize;
  const parts = [...document.querySelectorAll(
    '#header #site-name a, #header .theme-toggle, #header #user-tools a, #header #logout-form button'
  )].filter((element) => element.offsetWidth).map((element) => ({
    name: (element.closest('#site-name') ? 'site-name' : element.className || element.innerText).trim(),
    box: element.getBoundingClientRect().toJSON(),
  }));
  const overlaps = [];
  parts.forEach((a, i) => parts.slice(i + 1).forEach((b) => {
    const wide = Math.min(a.box.right, b.box.right) - Math.max(a.box.left, b.box.left);
    const high = Math.min(a.box.bottom, b.box.bottom) - Math.max(a.box.top, b.box.top);
    if (wide > 1 && high > 1) overlaps.push([a.name, b.name]);
  }));
  const name = parts.find((part) => part.name === 'site-name').box;
  const toggle = parts.find((part) => part.name === 'theme-toggle').box;
  const sameLine = toggle.top < name.bottom && name.top < toggle.bottom;
  return {
    parts: parts.map((part) => part.name),
    overlaps,
    room: sameLine ? toggle.left - name.right : null,
  };
}"""

# A phone's own text size, as its person set it larger.
ROOT_FONT_SIZES = ["", "22px"]


@pytest.mark.parametrize("viewport", [PHONE, {"width": 320, "height": 700}, DESKTOP])
def test_nothing_in_the_keepers_header_overlaps_the_title(open_tab, settings, viewport):
    width = viewport["width"]
    # The login page, before the keeper has logged in, then the keeper's pages
    tab = open_tab(viewport=viewport)
    headers = {}
    for size in ROOT_FONT_SIZES:
        tab.page.goto("/admin/login/")
        headers[f"login {size}"] = tab.page.evaluate(ADMIN_HEADER, size)
        tab.screenshot(f"admin-header-login-{width}{size}")
    tab = _keeper_tab(open_tab, settings)
    tab.page.set_viewport_size(viewport)
    for path in ("/admin/", "/admin/calls/call/add/", "/admin/password_change/"):
        for size in ROOT_FONT_SIZES:
            tab.page.goto(path)
            headers[f"{path} {size}"] = tab.page.evaluate(ADMIN_HEADER, size)
            tab.screenshot(f"admin-header-{path.strip('/').replace('/', '-')}-{width}{size}")

    for page, header in headers.items():
        # Then nothing in the header covers anything else, and the toggle keeps its distance
        # from the name, on the name's line or on a line of its own
        assert header["overlaps"] == [], (page, header)
        assert header["room"] is None or header["room"] >= 8, (page, header)
