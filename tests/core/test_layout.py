"""The folders are the architecture (README "Architecture"): the core imports no app and no door,
the domain apps import no door, and a door imports the core and the domain apps, never another door.

Read from the source with `ast`, so a new import that breaks the layering fails here, not in review.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = "core"
DOMAIN_APPS = ("agents", "tasks", "calls", "ledger")
DOORS = ("a2a_gateway", "http_api", "mcp_door", "web", "keeper", "ops")
# Django finds each app's admin by the name `<app>.admin`, so the keeper's door keeps a module there.
ADMIN_MODULE = "admin.py"


def imported_packages(path: Path) -> set[str]:
    """The top-level packages one module imports (absolute imports; relative ones stay inside)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def modules(package: str) -> list[Path]:
    return [path for path in (ROOT / package).rglob("*.py") if "migrations" not in path.parts]


def layer_of(path: Path) -> str:
    """The package a module belongs to, an app's admin module counting as the keeper's door."""
    package = path.relative_to(ROOT).parts[0]
    return "keeper" if package in DOMAIN_APPS and path.name == ADMIN_MODULE else package


def forbidden_for(layer: str) -> set[str]:
    """What a module of `layer` must not import. `cairn` is the composition root: nothing below it
    may point back up at it."""
    if layer == CORE:
        return {*DOMAIN_APPS, *DOORS, "cairn"}
    if layer in DOMAIN_APPS:
        return {*DOORS, "cairn"}
    return (set(DOORS) - {layer}) | {"cairn"}


def offending_imports(packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Each module of `packages` that imports what its layer must not, with what it imports."""
    found = {}
    for package in packages:
        for path in modules(package):
            banned = forbidden_for(layer_of(path)) & imported_packages(path)
            if banned:
                found[str(path.relative_to(ROOT))] = banned
    return found


def test_every_layer_is_a_package_here():
    for package in (CORE, *DOMAIN_APPS, *DOORS):
        assert (ROOT / package / "__init__.py").is_file(), package


def test_the_walk_sees_a_door_importing_a_door(tmp_path):
    module = tmp_path / "views.py"
    module.write_text(
        "from a2a_gateway.card import agent_card\nimport web.pages\nfrom . import x\n"
    )
    assert imported_packages(module) == {"a2a_gateway", "web"}


def test_the_core_imports_no_app_no_door_and_not_the_project():
    assert offending_imports((CORE,)) == {}


def test_the_domain_apps_import_no_door_and_not_the_project():
    assert offending_imports(DOMAIN_APPS) == {}


@pytest.mark.parametrize("door", DOORS)
def test_a_door_imports_no_other_door_and_not_the_project(door):
    assert offending_imports((door,)) == {}
