"""SPEC §11 through a real HTTP client: the feed's filters and pages, the calls pages, the Atom feed,
escaping, and the security headers on every kind of response."""

from __future__ import annotations

import re
import uuid
import warnings
import xml.etree.ElementTree as ET
from datetime import timedelta

import pytest

from agents.models import Door
from agents.services import Caller
from calls.services import call_answer, call_close, call_create
from core.cursors import cursor_encode
from tests.factories import contribution_report, deadline_in
from web.pages import duration_words, time_left

ATOM = "{http://www.w3.org/2005/Atom}"
INSTANT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
XSS_TITLE = "<script>alert(1)</script> title"


def _cards(page: str) -> list[str]:
    return re.findall(r'<article class="card task-card"', page)


def _next_link(page: str) -> str | None:
    match = re.search(r'<a rel="next" href="([^"]+)"', page)
    return match and match.group(1).replace("&amp;", "&")


# --- the feed ------------------------------------------------------------------------------------


def test_feed_filters_by_mode(http, task_with):
    open_task = task_with(title="An open task about the Node.js fetch docs")
    evaluated = task_with(deadline_s=1.2, title="An evaluated task about json.dumps")
    evaluated.wait_past_deadline()

    pages = {mode: http.get("/a2a", params={"mode": mode}) for mode in ("open", "evaluated", "all")}

    assert all(page.status_code == 200 for page in pages.values())
    assert "An open task about the Node.js fetch docs" in pages["open"].text
    assert "An evaluated task about json.dumps" not in pages["open"].text
    assert "An evaluated task about json.dumps" in pages["evaluated"].text
    assert "An open task about the Node.js fetch docs" not in pages["evaluated"].text
    assert len(_cards(pages["all"].text)) == 2
    assert 'href="?mode=evaluated" aria-current="page"' in pages["evaluated"].text
    assert f"/a2a/tasks/{open_task.id}" in pages["all"].text
    # The evaluated card shows the outcome badge; the open one its time left
    assert 'class="badge badge-unresolved">Unresolved<' in pages["evaluated"].text
    assert re.search(r'class="time-left">closes in \d+ min<', pages["open"].text)


def test_feed_pages_by_cursor_bound_to_its_mode(http, make_agent, task_with):
    # Given 21 open tasks (two per poster, the daily cap)
    posters = [make_agent() for _ in range(11)]
    titles = []
    for n in range(21):
        title = f"Open task number {n:02d} about the A2A transport"
        task_with(title=title, poster=posters[n // 2])
        titles.append(title)

    # When the open feed is read page by page
    first = http.get("/a2a", params={"mode": "open"})
    second = http.get("/a2a" + _next_link(first.text))

    # Then the first page holds the 20 closing soonest, and the next the last one
    assert len(_cards(first.text)) == 20
    assert "21 tasks" in first.text
    assert titles[0] in first.text and titles[20] not in first.text
    assert len(_cards(second.text)) == 1 and titles[20] in second.text
    assert _next_link(second.text) is None
    assert 'href="?mode=open">First page</a>' in second.text

    # And a cursor is refused by another mode, a forged one and an unknown mode too
    cursor = re.search(r"cursor=([^&\"]+)", _next_link(first.text)).group(1)
    assert http.get(f"/a2a?mode=evaluated&cursor={cursor}").status_code == 400
    assert http.get("/a2a", params={"mode": "open", "cursor": "forged"}).status_code == 400
    assert http.get("/a2a", params={"mode": "sealed"}).status_code == 400
    # And one this site signed for the mode that names a section the mode has not
    stranger = cursor_encode("web:open", ["closed", "2026-12-01T00:00:00+00:00", str(uuid.uuid4())])
    assert http.get("/a2a", params={"mode": "open", "cursor": stranger}).status_code == 400


def _titles(page: str) -> list[str]:
    return re.findall(r'<h2 class="card-title" id="task-[^"]+"><a href="[^"]+">([^<]+)</a>', page)


def test_feed_puts_open_tasks_first_closing_soonest_then_evaluated_newest_first(http, task_with):
    # Given two tasks evaluated one after the other, and open tasks closing at different times
    evaluated = []
    for title in ("Evaluated earlier", "Evaluated later"):
        posted = task_with(deadline_s=1.2, title=title)
        posted.wait_past_deadline()
        http.get(f"/a2a/tasks/{posted.id}")  # a read evaluates it
        evaluated.append(title)
    task_with(deadline_s=5 * 3600, title="Open closing in five hours")
    opened = [f"Open closing in {n:02d} minutes" for n in range(40, 58)]
    for title in reversed(opened):
        task_with(deadline_s=int(title.split()[-2]) * 60, title=title)
    opened.append("Open closing in five hours")

    # When the feed is read page by page
    first = http.get("/a2a")
    second = http.get("/a2a" + _next_link(first.text))

    # Then the open tasks come first, closing soonest at the top, then the most recently evaluated
    assert _titles(first.text) == [*opened, "Evaluated later"]
    assert _titles(second.text) == ["Evaluated earlier"]
    assert _next_link(second.text) is None
    # And the open and evaluated filters keep their own order
    assert _titles(http.get("/a2a", params={"mode": "open"}).text) == opened
    assert _titles(http.get("/a2a", params={"mode": "evaluated"}).text) == evaluated[::-1]


def test_unknown_task_is_a_404_page(http):
    for task_id in (str(uuid.uuid4()), "not-a-uuid"):
        response = http.get(f"/a2a/tasks/{task_id}")
        assert response.status_code == 404
        assert response.headers["content-type"] == "text/html; charset=utf-8"
        assert "<title>No such task · Cairn</title>" in response.text


@pytest.mark.parametrize(
    "path", ["/a2a/nothing-here", "/a2a/tasks/x/y", "/nothing", "/.well-known/nothing"]
)
def test_an_unknown_path_gets_the_branded_404_under_debug_too(http, settings, path):
    settings.DEBUG = True
    response = http.get(path)
    assert response.status_code == 404
    assert "<title>Not found · Cairn</title>" in response.text
    assert "URLconf" not in response.text and "a2a/tasks/" not in response.text


def test_under_debug_the_admin_and_the_api_keep_their_own_404s(http, settings):
    settings.DEBUG = True
    api = http.get("/api/nothing-here")
    assert api.status_code == 404 and api.json()["error"]["code"] == "not_found"
    assert http.get("/a2a").status_code == 200
    assert http.get("/a2a/tasks/not-a-uuid").text.count("No such task") >= 1
    assert http.get("/admin", follow_redirects=False).status_code == 301


def test_agent_text_is_escaped_and_agent_links_are_marked(http, task_with):
    posted = task_with(
        title=XSS_TITLE,
        question='Does the page "escape" <b>this</b> & that, and <img src=x onerror=alert(1)>?',
    )

    for path in ("/a2a", f"/a2a/tasks/{posted.id}"):
        page = http.get(path).text
        assert "<script>alert(1)</script>" not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt; title" in page
        assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
        assert "<script" not in page  # no script at all, agents' or ours
        for url in posted.task.sources:
            assert f'<a href="{url}" rel="nofollow ugc noopener">' in page


def test_evaluated_task_page_lists_contributions_with_digests(http, task_with):
    posted = task_with(
        deadline_s=1.2,
        reports=(
            contribution_report(),
            contribution_report(verdict="source_unclear", limitations=[]),
        ),
    )
    posted.wait_past_deadline()

    page = http.get(f"/a2a/tasks/{posted.id}").text

    assert 'class="badge badge-contested">Contested<' in page
    assert page.count('<article class="card contribution"') == 2
    positions = [page.index(receipt["report_digest"]) for receipt in posted.receipts]
    assert positions == sorted(positions)  # in the order received
    assert "RFC 8785" in page and "SHA-256" in page
    for stamp in re.findall(r'<time datetime="([^"]+)">', page):
        assert INSTANT.fullmatch(stamp)
    # The digest help points at the reports' JSON, which is above it
    assert page.index("The report as hashed") < page.index("its JSON above")


def test_an_open_task_page_points_at_no_report_that_is_not_there(http, task_with):
    posted = task_with(reports=(contribution_report(),))

    page = http.get(f"/a2a/tasks/{posted.id}").text

    assert "The report as hashed" not in page
    assert "above" not in page
    assert "once the task is evaluated, every report is published on this page" in page


# --- calls ---------------------------------------------------------------------------------------


def test_calls_list_and_call_page_show_public_answers(http, make_agent):
    answerer = make_agent(label="answerer label")
    open_call = call_create(
        title="Which paper topic next?", body="Suggest one.\nWith reasons.", kind="paper_topic"
    )
    closed_call = call_create(
        title="A closed service discussion", body="Over now.", kind="service_discussion"
    )
    call_close(call=closed_call)
    call_answer(
        Caller(answerer.agent, "op-1", Door.HTTP),
        call_id=open_call.id,
        payload={
            "schema": "cairn.call.response/0.1",
            "stance": "mixed",
            "body": "Commit-reveal for <agents> & their reports, with reasons.",
            "public_output_approved": True,
        },
    )

    listing = http.get("/a2a/calls")
    open_only = http.get("/a2a/calls", params={"mode": "open"})
    closed_only = http.get("/a2a/calls", params={"mode": "closed"})
    page = http.get(f"/a2a/calls/{open_call.id}")

    assert (
        listing.status_code
        == open_only.status_code
        == closed_only.status_code
        == page.status_code
        == 200
    )
    assert (
        "Which paper topic next?" in listing.text and "A closed service discussion" in listing.text
    )
    assert "A closed service discussion" not in open_only.text
    assert "Which paper topic next?" not in closed_only.text
    assert "1 answer<" in listing.text
    assert "Commit-reveal for &lt;agents&gt; &amp; their reports, with reasons." in page.text
    assert 'class="badge badge-stance">Mixed<' in page.text
    assert "answerer label" not in page.text and str(answerer.agent.id) not in page.text
    assert f"/api/a2a-calls/{open_call.id}/responses" in page.text
    assert http.get(f"/a2a/calls/{uuid.uuid4()}").status_code == 404
    assert http.get("/a2a/calls", params={"mode": "bogus"}).status_code == 400


# --- Atom ----------------------------------------------------------------------------------------


def _text(element: ET.Element, name: str) -> str:
    child = element.find(f"{ATOM}{name}")
    assert child is not None, f"missing atom:{name}"
    return child.text or ""


def test_atom_feed_lists_evaluated_tasks_as_valid_atom(http, live_url, task_with):
    evaluated = task_with(
        deadline_s=1.2, title=XSS_TITLE, reports=(contribution_report(), contribution_report())
    )
    still_open = task_with(title="An open task that is not in the feed")
    evaluated.wait_past_deadline()
    http.get(f"/a2a/tasks/{evaluated.id}")  # a read evaluates it

    response = http.get("/a2a/feed.atom")

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/atom+xml; charset=utf-8"
    assert response.content.startswith(b'<?xml version="1.0" encoding="utf-8"?>')
    feed = ET.fromstring(response.content)
    assert feed.tag == f"{ATOM}feed"
    assert _text(feed, "id") == f"{live_url}/a2a/feed.atom"
    assert _text(feed, "title")
    assert INSTANT.fullmatch(_text(feed, "updated"))
    assert _text(feed.find(f"{ATOM}author"), "name") == "Cairn"
    self_link = [link for link in feed.findall(f"{ATOM}link") if link.get("rel") == "self"]
    assert self_link[0].get("href") == f"{live_url}/a2a/feed.atom"
    entries = feed.findall(f"{ATOM}entry")
    assert len(entries) == 1
    entry = entries[0]
    assert _text(entry, "id") == f"urn:uuid:{evaluated.id}"
    assert _text(entry, "title") == XSS_TITLE
    assert entry.find(f"{ATOM}title").get("type") == "text"
    evaluated.task.refresh_from_db()
    assert (
        _text(entry, "updated")
        == _text(feed, "updated")
        == evaluated.task.evaluation["evaluated_at"]
    )
    assert entry.find(f"{ATOM}link").get("href") == f"{live_url}/a2a/tasks/{evaluated.id}"
    assert _text(entry, "summary").startswith(
        "Resolved: Source supported. 2 contributions of 2 needed"
    )
    assert still_open.id not in response.text
    assert http.get(f"/a2a/tasks/{evaluated.id}").status_code == 200


def test_atom_summary_counts_contributions_in_plain_words(http, task_with):
    for reports in ((), (contribution_report(),)):
        posted = task_with(deadline_s=1.2, reports=reports)
        posted.wait_past_deadline()
        http.get(f"/a2a/tasks/{posted.id}")

    summaries = [
        _text(entry, "summary")
        for entry in ET.fromstring(http.get("/a2a/feed.atom").content).findall(f"{ATOM}entry")
    ]

    assert [s.split(". ")[1].split(" (")[0] for s in summaries] == [
        "1 contribution of 2 needed",
        "0 contributions of 2 needed",
    ]
    assert not any("(s)" in s for s in summaries)


def test_atom_feed_without_entries_is_still_valid(http):
    feed = ET.fromstring(http.get("/a2a/feed.atom").content)

    assert feed.tag == f"{ATOM}feed"
    assert INSTANT.fullmatch(_text(feed, "updated"))
    assert feed.findall(f"{ATOM}entry") == []


# --- headers -------------------------------------------------------------------------------------


# The site's pages: each answers GET and HEAD only.
PAGES = ["/a2a", "/a2a/join", "/a2a/calls", "/a2a/feed.atom", "/a2a-join-request.txt"]


@pytest.mark.parametrize(
    "path",
    [
        *PAGES,
        "/skills/cairn-a2a/SKILL.md",
        "/static/cairn.css",
        "/a2a/tasks/00000000-0000-0000-0000-000000000000",
        "/admin/login/",
        "/no/such/page",
    ],
)
def test_security_headers_on_every_response(http, path):
    response = http.get(path)

    csp = response.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "script-src 'self'" in csp and "style-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp and "base-uri 'none'" in csp
    assert "'unsafe-inline'" not in csp
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "same-origin"


def test_site_root_leads_to_the_feed(http):
    response = http.get("/")

    assert response.status_code == 302
    assert response.headers["location"] == "/a2a"


@pytest.mark.parametrize(
    "path",
    [
        *PAGES,
        "/.well-known/jwks.json",
        "/verify/cairn_verify.py",
        "/verify/requirements.txt",
        "/mcp/cairn_mcp.py",
        "/mcp/requirements.txt",
        "/schemas/a2a/",
    ],
)
def test_a_read_only_route_answers_another_method_405_not_a_csrf_page(http, path):
    for method in ("POST", "PUT", "DELETE"):
        refused = http.request(method, path, content=b"x")
        assert refused.status_code == 405, (method, refused.text[:200])
        assert refused.headers["Allow"] == "GET, HEAD"
    assert http.head(path).status_code == 200


def test_stylesheet_is_served_and_needs_no_script(http):
    css = http.get("/static/cairn.css")

    assert css.status_code == 200
    assert "color-scheme: light dark" in css.text
    assert "light-dark(" in css.text
    assert "system-ui" in css.text


def test_static_files_are_sent_without_the_sync_iterator_warning(http):
    # The live server runs in this process, so a warning it raises is caught here.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        css = http.get("/static/cairn.css")
        head = http.head("/static/cairn.css")

    assert css.status_code == 200 and "system-ui" in css.text
    assert head.status_code == 200 and head.content == b""
    assert [str(w.message) for w in caught if "StreamingHttpResponse" in str(w.message)] == []


# --- time left, rendered on the server --------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (2 * 3600 + 14 * 60 + 59, "2 h 14 min"),
        (3 * 86400 + 4 * 3600 + 5, "3 d 4 h"),
        (86400, "1 d"),
        (3600, "1 h"),
        (14 * 60 + 3, "14 min"),
        (45, "45 s"),
        (-5, "0 s"),
    ],
)
def test_duration_words(seconds, words):
    assert duration_words(timedelta(seconds=seconds)) == words


def test_time_left_reads_as_a_countdown():
    assert time_left(deadline_in(2 * 3600 + 14 * 60 + 30)) == "closes in 2 h 14 min"
    assert time_left(deadline_in(-10)) == "closing now"


# --- the join page ----------------------------------------------------------------------------

JOIN_BINDINGS = {"JSON-RPC": "JSONRPC", "HTTP+JSON": "HTTP+JSON", "gRPC": "GRPC"}


@pytest.mark.parametrize("grpc_url", ["127.0.0.1:50999", ""], ids=["grpc-on", "grpc-off"])
def test_the_join_page_names_every_a2a_1_0_binding_the_card_lists(http, settings, grpc_url):
    settings.CAIRN_GRPC_URL = grpc_url
    card = http.get("/.well-known/agent-card.json").json()

    section = http.get("/a2a/join").text.split('<section id="a2a"')[1].split("</section>")[0]

    named = {
        (JOIN_BINDINGS[label], url.removesuffix("/…"))
        for label, url in re.findall(
            r"<dt>(JSON-RPC|HTTP\+JSON|gRPC)</dt><dd><code>(?:POST )?([^<]+)</code>", section
        )
    }
    listed = {
        (interface["protocolBinding"], interface["url"])
        for interface in card["supportedInterfaces"]
        if interface["protocolVersion"] == "1.0"
    }
    assert named == listed
    assert ("GRPC", grpc_url) in named if grpc_url else "gRPC" not in section
