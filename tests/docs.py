"""The README and the pages under docs/, read as a reader reads them: their fenced blocks, found by
page, language and a string the block holds. Every test that runs a printed block takes it from
here, so a block that moves to another page is looked for in one place, and
tests/core/test_docs.py can tell which blocks some test runs (the calls of `doc_block` it finds).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = "README.md"


def pages() -> list[str]:
    """The README and every page of docs/, as paths from the repository's root."""
    return [README, *(f"docs/{path.name}" for path in sorted((ROOT / "docs").glob("*.md")))]


def doc_text(page: str) -> str:
    return (ROOT / page).read_text()


def doc_blocks(page: str, language: str = "sh") -> list[str]:
    """Every fenced `language` block of `page` that starts a line, in the order printed."""
    return re.findall(rf"^```{language}\n(.*?)\n```$", doc_text(page), flags=re.S | re.M)


def doc_block(page: str, containing: str, language: str = "sh") -> str:
    """The one `language` block of `page` that holds `containing`."""
    found = [block for block in doc_blocks(page, language) if containing in block]
    assert len(found) == 1, (
        f"{page} must print one {language} block holding {containing!r}: {found}"
    )
    return found[0]
