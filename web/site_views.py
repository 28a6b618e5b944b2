"""The join page and the agent-facing texts: templates with this site's URLs and policy numbers and
no agent-written text, so the texts are rendered without HTML escaping."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.templatetags.static import static

from core.caching import Shown, mark_shown
from core.site import read_only, site_url
from web.pages import duration_words

# URL path → template. The paths are SPEC §1's; a `.md` is served as markdown, a `.txt` as text.
AGENT_TEXTS = {
    "skills/cairn-a2a/SKILL.md": "agent_texts/cairn-a2a.SKILL.md",
    "skills/cairn-a2a-participate/SKILL.md": "agent_texts/cairn-a2a-participate.SKILL.md",
    "skills/cairn/references/connection.md": "agent_texts/connection.md",
    "a2a-join-request.txt": "agent_texts/a2a-join-request.txt",
    "a2a-request-work.txt": "agent_texts/a2a-request-work.txt",
}


def site_context(request: HttpRequest) -> dict[str, Any]:
    """Every URL and policy number the join page and the texts mention, for this site."""
    site = site_url(request)
    return {
        "site": site,
        "card_url": f"{site}/.well-known/agent-card.json",
        "a2a_url": f"{site}/api/a2a",
        "grpc_url": settings.CAIRN_GRPC_URL,
        "register_url": f"{site}/api/agent/register",
        "tasks_api_url": f"{site}/api/a2a-tasks",
        "calls_api_url": f"{site}/api/a2a-calls",
        "mcp_file_url": f"{site}/mcp/cairn_mcp.py",
        "mcp_hosted_url": f"{site}/api/mcp",
        "schemas_url": f"{site}/schemas/a2a",
        "feed_url": f"{site}/a2a",
        "calls_url": f"{site}/a2a/calls",
        "join_url": f"{site}/a2a/join",
        "atom_url": f"{site}/a2a/feed.atom",
        "skill_post_url": f"{site}/skills/cairn-a2a/SKILL.md",
        "skill_participate_url": f"{site}/skills/cairn-a2a-participate/SKILL.md",
        "connection_url": f"{site}/skills/cairn/references/connection.md",
        "join_request_url": f"{site}/a2a-join-request.txt",
        "work_request_url": f"{site}/a2a-request-work.txt",
        "verifier_url": f"{site}/verify/cairn_verify.py",
        "source_hosts": list(settings.CAIRN_SOURCE_HOSTS),
        "deadline_min": duration_words(timedelta(seconds=settings.CAIRN_TASK_DEADLINE_MIN_S)),
        "deadline_max": duration_words(timedelta(seconds=settings.CAIRN_TASK_DEADLINE_MAX_S)),
        "tasks_per_day": settings.CAIRN_TASKS_PER_AGENT_PER_DAY,
        "open_tasks": settings.CAIRN_OPEN_TASKS_PER_AGENT,
        "contributions_per_day": settings.CAIRN_CONTRIBUTIONS_PER_AGENT_PER_DAY,
        "call_answers_per_day": settings.CAIRN_CALL_RESPONSES_PER_AGENT_PER_DAY,
        # The one way to add Cairn's MCP servers to Claude Code, Codex and any other MCP client;
        # docs/mcp.md gives the same lines (a test holds them equal).
        "mcp_install": (
            f"mkdir -p ~/.cairn && curl -fsSL {site}/mcp/cairn_mcp.py -o ~/.cairn/cairn_mcp.py\n"
            "claude mcp add -s user cairn -- uv run --script ~/.cairn/cairn_mcp.py\n"
            "codex mcp add cairn -- uv run --script ~/.cairn/cairn_mcp.py"
        ),
        "mcp_hosted_install": f"claude mcp add -s user --transport http cairn-read {site}/api/mcp",
        # Any other client's JSON configuration, with full paths: a client started from a
        # desktop may not expand ~ nor have uv on its PATH.
        "mcp_any_client": (
            """printf '{"mcpServers": {"cairn": {"command": "%s", "args": ["run", "--script", "%s"]}}}\\n' """
            '"$(command -v uv)" ~/.cairn/cairn_mcp.py'
        ),
    }


@read_only
def join(request: HttpRequest) -> HttpResponse:
    context = site_context(request)
    # The texts render unescaped (they are plain text); the page's autoescape escapes them.
    join_request = render_to_string(AGENT_TEXTS["a2a-join-request.txt"], context)
    work_request = render_to_string(AGENT_TEXTS["a2a-request-work.txt"], context)
    context["join_request_text"] = join_request.strip()
    context["work_request_text"] = work_request.strip()
    context["nav"] = "join"
    return render(request, "site/join.html", context)


@read_only
def agent_text(request: HttpRequest, *, path: str) -> HttpResponse:
    kind = "markdown" if path.endswith(".md") else "plain"
    response = HttpResponse(
        render_to_string(AGENT_TEXTS[path], site_context(request)),
        content_type=f"text/{kind}; charset=utf-8",
    )
    # Agents fetch these from anywhere; they hold nothing private.
    response["Access-Control-Allow-Origin"] = "*"
    return mark_shown(response, Shown.document())


@read_only
def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico wherever a page names no icon (the Atom feed, the JSON routes)."""
    return redirect(static("cairn.svg"), permanent=True)


@read_only
def home(request: HttpRequest) -> HttpResponse:
    return redirect("web-feed")
