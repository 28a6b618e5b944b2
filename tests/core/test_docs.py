"""The README is the entry point and docs/ holds the references it links to: every link between
them lands on a page and a heading that exist, every page is linked from the README, and every
block a reader would run is run by some test (it takes the block with `tests.docs.doc_block`), or
is listed below with the reason no test runs it as printed."""

from __future__ import annotations

import ast
import re

from tests.docs import README, ROOT, doc_blocks, doc_text, pages

RUNNABLE = ("sh", "python", "js", "nginx")

# (page, a string of the block): why no test runs it as printed.
NOT_RUN = {
    ("docs/deployment.md", "SECRET_KEY=..."): "an operator's commands, with the operator's own "
    "values to fill in, that serve until stopped; tests/deploy runs the same commands",
    ("docs/deployment.md", "CAIRN_DB_POOLER=transaction"): "sets the two variables only; "
    "tests/deploy/test_database.py runs Cairn behind PgBouncer in transaction mode with them",
    ("docs/deployment.md", "DATABASE_REPLICA_URLS="): "sets the two variables only, with an "
    "operator's hosts; tests/deploy/test_replicas.py runs Cairn with a replica given this way",
    ("docs/deployment.md", 'target_session_attrs=read-write"'): "sets the variable only, with an "
    "operator's hosts; tests/deploy/test_failover.py runs Cairn on a multi-host URL of this form",
    ("docs/deployment.md", "install -d -m 700 /etc/cairn"): "writes /etc as root; the settings "
    "tests read keys made by the same openssl commands",
    ("docs/deployment.md", "return 301 https://$host$request_uri;"): "a plain-http redirect on "
    "port 80, which a test cannot bind without root; Cairn's own answers do not depend on it",
    ("docs/mcp.md", '/mcp/requirements.txt"'): "installs the local MCP "
    "server's dependencies from the package index; the uv route beside it is run",
    ("docs/walkthrough.md", 'cairn_verify.py" seal'): "needs a site with keypers; "
    "tests/ledger/test_verifier_seal.py runs the verifier's seal against one",
}


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _prose(page: str) -> str:
    """The page without its fenced blocks, whose lines may start with `#`."""
    return re.sub(r"(?ms)^\s*```.*?^\s*```$", "", doc_text(page))


def _anchors(page: str) -> set[str]:
    return {_slug(heading) for heading in re.findall(r"^#+ (.+)$", _prose(page), flags=re.M)}


def _links(page: str) -> list[str]:
    """Every link of the page to a file of the repository, or to a heading of its own."""
    found = re.findall(r"\]\(([^)\s]+)\)", _prose(page))
    return [link for link in found if not re.match(r"[a-z]+:", link)]


def test_every_link_of_the_readme_and_docs_lands_on_a_page_and_a_heading():
    broken = []
    for page in pages():
        for link in _links(page):
            path, _, anchor = link.partition("#")
            target = (ROOT / page).parent / path if path else ROOT / page
            target_page = target.resolve().relative_to(ROOT).as_posix()
            if not target.exists() or (anchor and anchor not in _anchors(target_page)):
                broken.append(f"{page}: {link}")
    assert broken == []


def test_the_readme_links_every_page_of_docs():
    linked = {link.partition("#")[0] for link in _links(README)}
    assert {page for page in pages() if page != README} <= linked


def _blocks_tests_run() -> set[tuple[str, str, str]]:
    """(page, string, language) of every `doc_block` call in tests/ whose arguments are written
    out (directly, or as a module's constant)."""
    taken = set()
    for source in (ROOT / "tests").rglob("*.py"):
        tree = ast.parse(source.read_text())
        constants = {
            target.id: node.value.value
            for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None)) == "doc_block"
            ):
                continue
            values = [
                argument.value if isinstance(argument, ast.Constant) else constants.get(argument.id)
                for argument in node.args
                if isinstance(argument, ast.Constant | ast.Name)
            ]
            if len(values) >= 2 and all(isinstance(value, str) for value in values):
                taken.add((values[0], values[1], values[2] if len(values) > 2 else "sh"))
    return taken


def test_every_block_a_reader_runs_is_run_by_a_test_or_says_why_not():
    taken = _blocks_tests_run()
    assert taken, "no test takes a printed block with doc_block"
    unrun, listed_but_run = [], []
    for page in pages():
        for language in RUNNABLE:
            for block in doc_blocks(page, language):
                run = any(
                    (found, lang) == (page, language) and string in block
                    for found, string, lang in taken
                )
                reasons = [key for key in NOT_RUN if key[0] == page and key[1] in block]
                if run and reasons:
                    listed_but_run.append(reasons)
                elif not run and not reasons:
                    unrun.append(f"{page} ({language}): {block.splitlines()[0]}")
    assert unrun == [] and listed_but_run == []


def test_every_block_said_not_run_is_still_printed():
    for page, string in NOT_RUN:
        assert any(string in block for language in RUNNABLE for block in doc_blocks(page, language))
