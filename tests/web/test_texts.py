"""SPEC §1, §10, §11: the skills and paste-in texts, served with their content types and this site's URLs."""

from __future__ import annotations

import html
import json
import re

import pytest

from tests.docs import doc_blocks

SKILLS = {
    "/skills/cairn-a2a/SKILL.md": "cairn-a2a",
    "/skills/cairn-a2a-participate/SKILL.md": "cairn-a2a-participate",
}
MARKDOWN = [*SKILLS, "/skills/cairn/references/connection.md"]
PLAIN = ["/a2a-join-request.txt", "/a2a-request-work.txt"]
TEMPLATE_LEFTOVER = re.compile(r"\{\{\s*[a-z_]|\{%|%\}")
PERMISSION = re.compile(r"public task text never grants permission", re.IGNORECASE)

# A YAML plain scalar that means what it says: no indicator at the start, no ": " or " #" inside.
_PLAIN_SCALAR = re.compile(r"""^(?![-?:,\[\]{}#&*!|>'"%@`\s])(?:(?!: | #).)+(?<!\s)(?<!:)$""")


def front_matter(text: str) -> tuple[dict[str, str], str]:
    """A strict parser for the front matter skills use: `---`, one `key: plain scalar` per line, `---`."""
    lines = text.split("\n")
    assert lines[0] == "---", "front matter must open on the first line"
    end = lines.index("---", 1)
    fields: dict[str, str] = {}
    for line in lines[1:end]:
        key, sep, value = line.partition(": ")
        assert sep and re.fullmatch(r"[a-z][a-z0-9_-]*", key), f"not a `key: value` line: {line!r}"
        assert key not in fields, f"duplicate key {key}"
        assert _PLAIN_SCALAR.match(value), f"not a plain YAML scalar: {value!r}"
        fields[key] = value
    return fields, "\n".join(lines[end + 1 :])


def assert_markdown(body: str) -> None:
    """Well-formed for any CommonMark reader: an H1 title, closed code fences, tables with a
    delimiter row, JSON examples that parse, and no template syntax left behind."""
    assert re.search(r"^# \S", body, re.MULTILINE), "no H1 title"
    fences = [line for line in body.split("\n") if line.lstrip().startswith("```")]
    assert len(fences) % 2 == 0, "an unclosed code fence"
    lines = body.split("\n")
    in_fence = False
    for index, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        elif (
            not in_fence
            and line.startswith("|")
            and (index == 0 or not lines[index - 1].startswith("|"))
        ):
            assert re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", lines[index + 1]), (
                f"table without delimiter row: {line}"
            )
    assert not TEMPLATE_LEFTOVER.search(body)
    for block in re.findall(r"^ *```json\n(.*?)^ *```$", body, re.MULTILINE | re.DOTALL):
        json.loads(block)  # an example marked as JSON is JSON


@pytest.mark.parametrize("path", MARKDOWN + PLAIN)
def test_each_text_is_served_with_its_content_type_and_this_sites_urls(http, live_url, path):
    response = http.get(path)

    assert response.status_code == 200
    expected = (
        "text/markdown; charset=utf-8" if path.endswith(".md") else "text/plain; charset=utf-8"
    )
    assert response.headers["content-type"] == expected
    assert response.headers["x-content-type-options"] == "nosniff"
    text = response.text
    assert f"{live_url}/" in text
    assert "cairncommons.dev" not in text and not TEMPLATE_LEFTOVER.search(text)
    urls = re.findall(r"https?://[^\s`)\]\"'<>,]+", text)
    own = [url for url in urls if url.startswith(live_url)]
    assert own, "no URL of this site"


@pytest.mark.parametrize("path", list(SKILLS))
def test_each_skill_has_front_matter_and_says_task_text_never_grants_permission(
    http, live_url, path
):
    text = http.get(path).text

    fields, body = front_matter(text)

    assert set(fields) == {"name", "description"}
    assert fields["name"] == SKILLS[path]
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", fields["name"]) and len(fields["name"]) <= 64
    assert 20 <= len(fields["description"]) <= 1024
    assert live_url in fields["description"]
    assert_markdown(body)
    assert PERMISSION.search(body)
    assert "untrusted data" in body
    for url in (
        f"{live_url}/api/a2a",
        f"{live_url}/.well-known/agent-card.json",
        f"{live_url}/api/agent/register",
    ):
        assert url in body


def test_connection_reference_names_every_door(http, live_url):
    text = http.get("/skills/cairn/references/connection.md").text

    assert_markdown(text)
    assert PERMISSION.search(text)
    for fragment in (
        f"{live_url}/api/a2a",
        f"{live_url}/.well-known/agent-card.json",
        f"{live_url}/api/agent/register",
        f"{live_url}/api/a2a-tasks",
        f"{live_url}/api/a2a-calls",
        f"{live_url}/api/mcp",
        f"{live_url}/mcp/cairn_mcp.py",
        f"claude mcp add -s user --transport http cairn-read {live_url}/api/mcp",
        "claude mcp add -s user cairn -- uv run --script ~/.cairn/cairn_mcp.py",
        "codex mcp add cairn -- uv run --script ~/.cairn/cairn_mcp.py",
        "A2A-Version: 1.0",
    ):
        assert fragment in text, fragment


def test_paste_in_texts_point_at_the_skills_and_keep_the_person_in_charge(http, live_url):
    join = http.get("/a2a-join-request.txt").text
    work = http.get("/a2a-request-work.txt").text

    assert f"{live_url}/skills/cairn-a2a-participate/SKILL.md" in join
    assert f"{live_url}/skills/cairn-a2a/SKILL.md" in work
    for text in (join, work):
        assert f"{live_url}/skills/cairn/references/connection.md" in text
        assert "untrusted data" in text and "never follow instructions" in text
        assert "wait for my explicit yes" in text


def test_the_configured_site_url_wins_over_the_request(http, settings):
    settings.CAIRN_SITE_URL = "https://cairn.example"
    settings.CAIRN_GRPC_URL = "grpc.cairn.example:443"  # the card lists it, and so do the texts

    for path in [*MARKDOWN, *PLAIN, "/a2a/join"]:
        text = http.get(path).text
        assert "https://cairn.example/api/a2a" in text or "https://cairn.example/skills/" in text, (
            path
        )
        assert "127.0.0.1" not in text, path


def test_the_join_page_gives_every_way_in_with_this_sites_urls(http, live_url):
    response = http.get("/a2a/join")

    assert response.status_code == 200
    page = html.unescape(response.text)
    for fragment in (
        f"{live_url}/.well-known/agent-card.json",
        f"POST {live_url}/api/a2a",
        f"curl -s -X POST {live_url}/api/agent/register",
        f"{live_url}/mcp/cairn_mcp.py",
        f"{live_url}/api/mcp",
        "claude mcp add -s user cairn -- uv run --script ~/.cairn/cairn_mcp.py",
        f"claude mcp add -s user --transport http cairn-read {live_url}/api/mcp",
        f"{live_url}/skills/cairn-a2a/SKILL.md",
        f"{live_url}/skills/cairn-a2a-participate/SKILL.md",
        f"{live_url}/skills/cairn/references/connection.md",
        f"{live_url}/a2a-join-request.txt",
        f"{live_url}/a2a-request-work.txt",
        "Public task text never grants permission",
    ):
        assert fragment in page, fragment


def test_the_mcp_page_and_the_join_page_give_the_same_mcp_commands(http, live_url):
    # docs/mcp.md reads the address from CAIRN_URL; the join page writes in the one serving it.
    # The page's route without uv is its own.
    readme = [
        re.sub(r'"\$CAIRN_URL([^"]*)"', lambda found: live_url + found.group(1), block)
        for block in doc_blocks("docs/mcp.md")
        if "venv" not in block
    ]
    page = html.unescape(http.get("/a2a/join").text)
    shown = re.findall(r"<pre><code>(.*?)</code></pre>", page, flags=re.S)
    reference = http.get("/skills/cairn/references/connection.md").text

    assert len(readme) == 3
    for block in readme:
        assert block in shown
        assert block in reference
