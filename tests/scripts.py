"""The served single-file scripts as built from their sources (`core.amalgam`), never the sources
or the site's modules themselves: written to a file to run, or loaded as modules for tests that
hold their words to the server's."""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from types import ModuleType

from core.amalgam import amalgamated


@cache
def built(source: Path) -> Path:
    """The one file built from `source`, as a site serves it but for its default URL."""
    path = Path(tempfile.mkdtemp(prefix="cairn-built-")) / source.name
    path.write_text(amalgamated(source), encoding="utf-8")
    return path


def loaded_script(source: Path, name: str) -> Iterator[ModuleType]:
    """The file built from `source` as module `name`, as `uv run` would load it (its `main` is
    not run); unloaded when the generator is closed."""
    spec = importlib.util.spec_from_file_location(name, built(source))
    assert spec is not None and spec.loader is not None, source
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    yield module
    del sys.modules[name]
