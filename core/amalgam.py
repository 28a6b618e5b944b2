"""The single files Cairn hands its users (the offline verifier, the local MCP server), built from
the modules the site itself imports, the way SQLite ships its amalgamation: each module a source
imports, dependencies first, above the source's own code, without the imports between them.
Anyone can rebuild the exact bytes from a commit with the standard library:

    python3 -m core.amalgam verify/cairn_verify.py > cairn_verify.py

A module built in must not import Django, a site package as a whole (`from core import privacy`),
or rename what it imports, and no two parts may define one top-level name: each would mean
something else in one file than in the site."""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FUTURE = "from __future__ import annotations\n"


class BuildError(Exception):
    """A source that cannot be built into one file; the message says which line and why."""


@dataclass(frozen=True)
class Part:
    lines: list[str]  # the file's lines, each with its end
    preamble_end: int  # lines before this are the PEP 723 header and the docstring
    dropped: frozenset[int]  # 0-based lines of the imports the build removes
    needs: tuple[Path, ...]  # the site's modules it imports, in the order it names them
    defines: frozenset[str]
    name: str  # its path in the repository


def _site_module(root: Path, module: str | None) -> Path | None:
    if not module:
        return None
    path = root.joinpath(*module.split(".")).with_suffix(".py")
    return path if path.is_file() else None


def _defined(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _part(root: Path, path: Path) -> Part:
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text, filename=str(path))
    where = path.relative_to(root).as_posix()
    dropped: set[int] = set()
    needs: list[Path] = []
    preamble_end = 0
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        preamble_end = first.end_lineno or 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _site_module(root, alias.name) or alias.name.split(".")[0] == "django":
                    raise BuildError(
                        f"{where}:{node.lineno}: `import {alias.name}` in a served file"
                    )
        if not isinstance(node, ast.ImportFrom):
            continue
        if (node.module or "").split(".")[0] == "django":
            raise BuildError(f"{where}:{node.lineno}: a served file cannot import Django")
        lines = set(range(node.lineno - 1, node.end_lineno or node.lineno))
        if node.module == "__future__":
            dropped |= lines
            continue
        module = _site_module(root, node.module)
        if module is None:
            if node.module and _site_module(root, f"{node.module}.{node.names[0].name}"):
                raise BuildError(
                    f"{where}:{node.lineno}: import names from {node.module}'s modules, not the "
                    "modules themselves"
                )
            continue
        if node not in tree.body:
            raise BuildError(f"{where}:{node.lineno}: a site module imported below the top level")
        if any(alias.asname for alias in node.names):
            raise BuildError(f"{where}:{node.lineno}: a name imported from {node.module} renamed")
        dropped |= lines
        needs.append(module)
    return Part(
        text.splitlines(keepends=True),
        preamble_end,
        frozenset(dropped),
        tuple(dict.fromkeys(needs)),
        frozenset(_defined(tree)),
        where,
    )


def _in_order(root: Path, source: Part) -> list[Part]:
    ordered: dict[Path, Part] = {}
    visiting: set[Path] = set()

    def visit(path: Path) -> None:
        if path in visiting:
            raise BuildError(f"{path.relative_to(root)} imports itself through a cycle")
        if path in ordered:
            return
        visiting.add(path)
        part = _part(root, path)
        for needed in part.needs:
            visit(needed)
        visiting.discard(path)
        ordered[path] = part

    for needed in source.needs:
        visit(needed)
    return list(ordered.values())


def _body(part: Part, start: int) -> str:
    kept = [line for n, line in enumerate(part.lines[start:], start) if n not in part.dropped]
    return re.sub(r"\n{4,}", "\n\n\n", "".join(kept).strip("\n")) + "\n"


def amalgamated(main: Path, root: Path = ROOT) -> str:
    """The one file built from `main`, each module it needs from `root` under a line naming it."""
    root = root.resolve()
    source = _part(root, main.resolve())
    modules = _in_order(root, source)
    seen: dict[str, str] = {}
    for part in [*modules, source]:
        for name in part.defines:
            if name in seen:
                raise BuildError(f"{name} is defined in both {seen[name]} and {part.name}")
            seen[name] = part.name
    pieces = ["".join(source.lines[: source.preamble_end]), "\n", FUTURE]
    for part in modules:
        pieces += ["\n\n", _banner(f"{part.name}, as the site imports it"), _body(part, 0)]
    pieces += ["\n\n", _banner(source.name), _body(source, source.preamble_end)]
    return "".join(pieces)


def _banner(title: str) -> str:
    return f"# {'=' * 96}\n# {title}\n# {'=' * 96}\n\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python3 -m core.amalgam <verify/cairn_verify.py | local_mcp/cairn_mcp.py>")
        return 2
    try:
        sys.stdout.write(amalgamated(ROOT / argv[0]))
    except BuildError as error:
        print(f"cannot build {argv[0]}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
