"""The gRPC client docs/bindings.md prints, run as printed: it finds `python -m cairn.grpc` on the
card the web server publishes and lists the tasks over gRPC alone."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.docs import doc_block


def test_the_printed_grpc_client_lists_the_tasks_over_grpc(card_url, poster, post_task, tmp_path):
    task = post_task(poster)
    script = tmp_path / "cairn_grpc_client.py"
    script.write_text(doc_block("docs/bindings.md", "TransportProtocol.GRPC", "python"))

    result = subprocess.run(
        [sys.executable, str(script)],
        env={**os.environ, "CAIRN_URL": card_url},
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"1 ['{task.pk}']\n"
