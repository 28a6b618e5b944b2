"""The A2A door through the official JS client (@a2a-js/sdk 1.3.0, tests/a2a/js): post, contribute,
read, list, and the errors, from the card the live server publishes.

Needs `node` (20+) and the package installed (`npm ci --prefix tests/a2a/js`); the test installs it
when npm is there, and is skipped when neither can be had."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from agents.models import AuditEntry
from core.canonical import canonical_digest
from tests.a2a.conftest import as_json
from tests.factories import (
    contribution_payload,
    contribution_report,
    open_task_payload,
    open_task_request,
)

JS_DIR = Path(__file__).parent / "js"


@pytest.fixture(scope="module")
def node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    if not (JS_DIR / "node_modules" / "@a2a-js" / "sdk").is_dir():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip(
                "@a2a-js/sdk is not installed and npm is missing: npm ci --prefix tests/a2a/js"
            )
        installed = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            check=False,
            cwd=JS_DIR,
            capture_output=True,
            timeout=300,
        )
        if installed.returncode != 0:
            pytest.skip(f"npm ci failed (offline?): {installed.stderr.decode()[-300:]}")
    return node


def test_the_official_js_client_posts_contributes_and_reads(node, live_url, poster, make_agent):
    contributors = [make_agent("js one"), make_agent("js two")]
    reports = [contribution_report(), contribution_report(verdict="source_unclear")]
    flow = {
        "base": live_url,
        "posterToken": poster.token,
        "contributorTokens": [agent.token for agent in contributors],
        "post": open_task_payload(),
        "contributions": [contribution_payload(report) for report in reports],
        "refused": open_task_payload(
            open_task_request(sources=["https://example.com/not-allowed"])
        ),
    }

    ran = subprocess.run(
        [node, "cairn_flow.mjs"],
        check=False,
        cwd=JS_DIR,
        input=json.dumps(flow).encode(),
        capture_output=True,
        timeout=120,
    )

    assert ran.returncode == 0, ran.stderr.decode()
    seen = json.loads(ran.stdout)
    posted = seen["posted"]
    assert (
        posted["status"]["state"] == 2 and posted["id"] == posted["contextId"]
    )  # TASK_STATE_WORKING
    for count, (answer, report) in enumerate(
        zip(seen["contributions"], reports, strict=True), start=1
    ):
        cairn = as_json(answer["metadata"]["cairn"])
        assert answer["id"] == posted["id"] and cairn["contributions_received"] == count
        assert cairn["contribution"]["report_digest"] == canonical_digest(report)
    refusal = seen["refusal"]
    assert refusal["role"] == 2 and refusal["metadata"] == {
        "cairn": {"accepted": False}
    }  # ROLE_AGENT
    assert refusal["parts"][0]["content"]["value"]["error"]["code"] == "source_not_allowed"
    assert (
        seen["got"]["id"] == posted["id"]
        and as_json(seen["got"]["metadata"]["cairn"])["contributions_received"] == 2
    )
    assert [task["id"] for task in seen["listed"]["tasks"]] == [posted["id"]]
    assert seen["listed"]["totalSize"] == 1 and seen["listed"]["nextPageToken"] == ""
    assert seen["listedWorking"]["pageSize"] == 1 and len(seen["listedWorking"]["tasks"]) == 1
    assert seen["cancel"]["code"] == -32002
    assert seen["missing"]["code"] == -32001
    assert (
        seen["unauthorized"]["code"] == -32600 and "Bearer token" in seen["unauthorized"]["message"]
    )
    assert [skill["id"] for skill in seen["card"]["skills"]] == [
        "cairn.post_task",
        "cairn.contribute",
    ]
    assert set(AuditEntry.objects.values_list("door", "client")) == {("a2a", "a2a-js-test/1.3.0")}
