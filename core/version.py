"""Cairn's own version, as every door reports it (the Agent Card, the MCP server's handshake)."""

from __future__ import annotations

import importlib.metadata
import tomllib
from functools import cache

from django.conf import settings


@cache
def cairn_version() -> str:
    """The version of the package: pyproject.toml in a source tree, the installed metadata otherwise,
    so a source tree whose version changed reports it without being reinstalled."""
    pyproject = settings.BASE_DIR / "pyproject.toml"
    if pyproject.is_file():
        with pyproject.open("rb") as file:
            return tomllib.load(file)["project"]["version"]
    return importlib.metadata.version("cairn")
