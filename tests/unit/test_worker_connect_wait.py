"""A worker started while the Temporal server is unreachable (a supervisor restarting it during
a server restart) waits for the server, saying so, instead of exiting at once and leaving its
host's sessions waiting for someone to start it again."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.harness import REPO


def test_a_worker_waits_for_an_unreachable_server(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there once closed
    env = {
        **os.environ,
        "AGENTLANE_DATA_DIR": str(tmp_path),
        "AGENTLANE_TEMPORAL_ADDRESS": f"127.0.0.1:{port}",
        "AGENTLANE_CONNECT_WAIT_S": "3",
        "PYTHONPATH": str(REPO),
    }
    began = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "workers.main"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0
    assert time.monotonic() - began >= 3
    assert "cannot reach the Temporal server" in out.stderr and "trying again" in out.stderr
