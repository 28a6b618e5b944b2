"""The build of the served single files (`core.amalgam`): each module a source imports from the
repository goes in once, before whatever needs it, and the build refuses what would make a module
mean something else in one file than in the site."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from core.amalgam import BuildError, amalgamated

SOURCE = '''# /// script
# dependencies = []
# ///
"""A served file."""

from __future__ import annotations

import json

from pkg.top import shout

print(json.dumps(shout("hello")))
'''


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root / "main.py"


def test_modules_go_in_once_dependencies_first_and_the_file_runs_alone(tmp_path):
    main = tree(
        tmp_path / "repo",
        {
            "main.py": SOURCE,
            "pkg/__init__.py": "",
            "pkg/top.py": "from pkg.base import LOUD\nfrom pkg.words import word\n\n\n"
            "def shout(text):\n    return word(text) + LOUD\n",
            "pkg/words.py": "from pkg.base import LOUD\n\n\ndef word(text):\n"
            "    return text.upper() if LOUD else text\n",
            "pkg/base.py": '"""The base."""\n\nfrom __future__ import annotations\n\nLOUD = "!"\n',
        },
    )

    built = amalgamated(main, tmp_path / "repo")

    names = [line[2:] for line in built.splitlines() if line.startswith("# pkg/")]
    assert names == [
        "pkg/base.py, as the site imports it",
        "pkg/words.py, as the site imports it",
        "pkg/top.py, as the site imports it",
    ]
    assert built.startswith('# /// script\n# dependencies = []\n# ///\n"""A served file."""\n')
    assert built.count("from __future__ import annotations") == 1
    assert "from pkg" not in built
    (tmp_path / "built.py").write_text(built, encoding="utf-8")
    ran = subprocess.run(
        [sys.executable, "built.py"], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert ran.stdout == '"HELLO!"\n'


SHOUT = "\n\ndef shout(text):\n    return text\n"


@pytest.mark.parametrize(
    ("module", "in_main", "refusal"),
    [
        ("from django.conf import settings\n" + SHOUT, "", "cannot import Django"),
        ("from pkg import base\n" + SHOUT, "", "import names from pkg's modules, not the modules"),
        ("from pkg.base import LOUD as SHOUTED\n" + SHOUT, "", "from pkg.base renamed"),
        ("import pkg.base\n" + SHOUT, "", "`import pkg.base` in a served file"),
        ("def shout(text):\n    from pkg.base import LOUD\n", "", "below the top level"),
        (SHOUT, "\n" + SHOUT, "shout is defined in both pkg/top.py and main.py"),
    ],
)
def test_the_build_refuses_what_would_change_a_modules_meaning(tmp_path, module, in_main, refusal):
    main = tree(
        tmp_path,
        {
            "main.py": SOURCE + in_main,
            "pkg/__init__.py": "",
            "pkg/base.py": 'LOUD = "!"\n',
            "pkg/top.py": module,
        },
    )

    with pytest.raises(BuildError, match=refusal):
        amalgamated(main, tmp_path)
