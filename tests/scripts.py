"""The served single-file scripts, loaded as modules for tests that hold their words to the server's."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType


def loaded_script(path: Path, name: str) -> Iterator[ModuleType]:
    """The script at `path` as module `name`, as `uv run` would load it (its `main` is not run);
    unloaded when the generator is closed."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules[name]
