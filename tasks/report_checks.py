"""The rules over a report (§4.1, §5) needing no database. The local MCP server and the verifier
are built with this module's text in them (`core.amalgam`), so it imports nothing of Django."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.errors import ErrorCode, Issue

REPORT_TEXT_LISTS = ("conditions", "attempts", "limitations")


def report_texts(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every free text of a report of the right shape, with its path, for the privacy screen."""
    texts = [("summary", report["summary"])]
    for name in REPORT_TEXT_LISTS:
        texts += [(f"{name}[{i}]", item) for i, item in enumerate(report[name])]
    return texts


def source_in_task_issues(source_urls: list[str], task_sources: list[str]) -> list[Issue]:
    allowed = set(task_sources)
    return [
        Issue(
            f"source_urls[{index}]",
            ErrorCode.SOURCE_NOT_IN_TASK,
            "is not one of the task's sources",
        )
        for index, url in enumerate(source_urls)
        if url not in allowed
    ]
