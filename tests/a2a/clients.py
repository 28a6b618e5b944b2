"""The official A2A clients the binding tests drive, each pinned, installed once and then kept:
`@a2a-js/sdk` 1.3.0 (tests/a2a/js) and 0.3.14 (tests/a2a/js_v0_3) with `npm ci`, and `a2a-sdk`
0.3.26 in a virtualenv of its own under the cache directory (`$CAIRN_TEST_CACHE`, else
`$XDG_CACHE_HOME/cairn-tests`), since the project's holds 1.3.0.

`python -m tests.a2a.clients` installs them all ahead (`make clients`, run by .ci/run); a test
installs what it misses on first use, and is skipped only when a client cannot be had."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).parent
JS_DIRS = (HERE / "js", HERE / "js_v0_3")
A2A_SDK_0_3 = "a2a-sdk==0.3.26"


class Unavailable(Exception):
    """A client that cannot be installed here (no network, no npm)."""


def cache_dir() -> Path:
    configured = os.environ.get("CAIRN_TEST_CACHE")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cairn-tests"


@contextmanager
def installing(lock: Path) -> Iterator[None]:
    """Hold an exclusive lock on `lock` (made if missing): test processes running side by side
    (pytest-xdist's workers, two checkouts sharing the cache) install one at a time, and the
    later ones find the install done."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)


def python_0_3() -> Path:
    """The interpreter of the virtualenv that holds `a2a-sdk` 0.3.26. It is built beside its
    place and moved in whole, so an interrupted install is never taken for one."""
    home = cache_dir() / A2A_SDK_0_3.replace("==", "-")
    with installing(cache_dir() / f"{home.name}.lock"):
        return _python_0_3(home)


def _python_0_3(home: Path) -> Path:
    python = home / "bin" / "python"
    if python.is_file():
        return python
    building = Path(tempfile.mkdtemp(prefix="building-", dir=home.parent))
    try:
        for step in (
            [sys.executable, "-m", "venv", str(building)],
            [str(building / "bin" / "python"), "-m", "pip", "install", "--quiet", A2A_SDK_0_3],
        ):
            ran = subprocess.run(step, capture_output=True, check=False, timeout=600)
            if ran.returncode != 0:
                raise Unavailable(f"could not install {A2A_SDK_0_3}: {ran.stderr.decode()[-300:]}")
        shutil.rmtree(home, ignore_errors=True)
        building.rename(home)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return python


def npm_installed(folder: Path) -> None:
    """`npm ci` in `folder`, unless what its lock file names is installed already."""
    with installing(folder / "node_modules.lock"):
        _npm_installed(folder)


def _npm_installed(folder: Path) -> None:
    installed = folder / "node_modules" / ".package-lock.json"
    lock = folder / "package-lock.json"
    if installed.is_file() and installed.stat().st_mtime >= lock.stat().st_mtime:
        return
    npm = shutil.which("npm")
    if npm is None:
        raise Unavailable(
            f"npm is missing: cannot install {folder}'s client (npm ci --prefix {folder})"
        )
    ran = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund"],
        check=False,
        cwd=folder,
        capture_output=True,
        timeout=300,
    )
    if ran.returncode != 0:
        raise Unavailable(f"npm ci failed in {folder}: {ran.stderr.decode()[-300:]}")


if __name__ == "__main__":
    for folder in JS_DIRS:
        npm_installed(folder)
    print(python_0_3())
