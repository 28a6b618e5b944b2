"""SPEC §10: the local server is one real Python file, served at `/mcp/cairn_mcp.py` with this
site's URL as its default CAIRN_URL, and startable by `uv run` / `pipx run` from its PEP 723 header."""

from __future__ import annotations

import importlib.metadata
import py_compile
import re
import sys
import tomllib

import anyio
import httpx
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from tests.mcp.conftest import LOCAL_SERVER, call, connected
from tests.scripts import built

# The reference reader of PEP 723 ("Inline script metadata").
PEP_723 = r"(?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$"
DEFAULT_URL_LINE = re.compile(r'^DEFAULT_CAIRN_URL = "(?P<url>[^"]*)"$', re.MULTILINE)


def script_metadata(source: str) -> dict:
    blocks = [match for match in re.finditer(PEP_723, source) if match.group("type") == "script"]
    assert len(blocks) == 1
    content = "".join(
        line[2:] if line.startswith("# ") else line[1:]
        for line in blocks[0].group("content").splitlines(keepends=True)
    )
    return tomllib.loads(content)


def test_the_file_compiles(tmp_path):
    py_compile.compile(
        str(built(LOCAL_SERVER)), cfile=str(tmp_path / "cairn_mcp.pyc"), doraise=True
    )


def test_its_header_names_its_dependencies_and_they_are_the_ones_tested():
    metadata = script_metadata(built(LOCAL_SERVER).read_text(encoding="utf-8"))

    requirements = {Requirement(line).name: Requirement(line) for line in metadata["dependencies"]}
    assert set(requirements) == {
        "mcp",
        "a2a-sdk",
        "cryptography",
        "httpx",
        "orjson",
        "pycryptodome",
        "rfc8785",
    }
    for name, requirement in requirements.items():
        assert requirement.specifier.contains(importlib.metadata.version(name)), name
    assert SpecifierSet(metadata["requires-python"]).contains(
        ".".join(map(str, sys.version_info[:3]))
    )


def test_it_is_served_with_the_sites_url_filled_in(live_url, tmp_path):
    response = httpx.get(live_url + "/mcp/cairn_mcp.py", timeout=20)

    assert response.status_code == 200
    assert response.headers["Content-Type"] == "text/x-python; charset=utf-8"
    served = response.text
    assert DEFAULT_URL_LINE.search(served)["url"] == live_url
    original = built(LOCAL_SERVER).read_text(encoding="utf-8")
    assert DEFAULT_URL_LINE.sub("", served) == DEFAULT_URL_LINE.sub("", original)
    downloaded = tmp_path / "cairn_mcp.py"
    downloaded.write_text(served, encoding="utf-8")
    py_compile.compile(str(downloaded), cfile=str(tmp_path / "cairn_mcp.pyc"), doraise=True)


def test_the_configured_site_url_wins_over_the_request(live_url, settings):
    settings.CAIRN_SITE_URL = "https://cairn.example.org"

    served = httpx.get(live_url + "/mcp/cairn_mcp.py", timeout=20).text

    assert DEFAULT_URL_LINE.search(served)["url"] == "https://cairn.example.org"


def test_the_downloaded_file_talks_to_its_site_without_configuration(
    live_url, local_server, tmp_path
):
    downloaded = tmp_path / "cairn_mcp.py"
    downloaded.write_text(
        httpx.get(live_url + "/mcp/cairn_mcp.py", timeout=20).text, encoding="utf-8"
    )
    server = local_server("downloaded", script=downloaded, CAIRN_URL=None)

    async def scenario():
        async with connected(server) as (client,):
            return await call(client, "cairn_local_status")

    status = anyio.run(scenario).data

    assert status["cairn_url"] == live_url
    assert status["server_reachable"] is True


def test_its_requirements_are_served_as_its_header_names_them(live_url):
    served = httpx.get(live_url + "/mcp/cairn_mcp.py", timeout=20).text
    requirements = httpx.get(live_url + "/mcp/requirements.txt", timeout=20)

    assert requirements.status_code == 200
    assert requirements.text.splitlines() == script_metadata(served)["dependencies"]
