"""exec never freezes the worker: no Python runs between fork and exec, the fork is off the
event loop, and a command still dies with its worker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from activities.tools import spawn

ROOT = Path(__file__).resolve().parents[2]
EXECS = 2000


def test_thousands_of_execs_beside_allocating_threads_never_hang() -> None:
    started = time.monotonic()
    try:
        out = subprocess.run(
            [sys.executable, "-m", "tests.unit.exec_stress", str(EXECS)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=90,
        )
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"the execs hung (no answer after {time.monotonic() - started:.0f}s): {err}")
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert figures["ran"] == EXECS and figures["failed"] == 0, figures
    # The fork is not on the event loop's thread: the loop never stops for long (a blocked
    # `Popen._execute_child` stalled it for good).
    assert figures["max_loop_stall"] < 5, figures


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


@pytest.mark.skipif(spawn.parent_death_prefix() == [], reason="util-linux setpriv not installed")
def test_a_command_dies_with_its_worker(tmp_path: Path) -> None:
    """kill -9 of the process that started the command: the command is gone at once, and it
    leaves nothing in the temporary folder (its output file has no name)."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    script = (
        "import asyncio, sys\n"
        "from activities.tools.exec_tool import run_exec\n"
        "from activities.tools.specs import ExecArgs\n"
        f"asyncio.run(run_exec({str(tmp_path)!r}, "
        "ExecArgs(command='echo $$ > shell.pid; sleep 60'), lambda _: None))\n"
    )
    worker = subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, env={**os.environ, "TMPDIR": str(scratch)}
    )
    pid_file = tmp_path / "shell.pid"
    try:
        deadline = time.monotonic() + 20
        while not (pid_file.exists() and pid_file.read_text().strip()):
            assert time.monotonic() < deadline, "the command did not start"
            time.sleep(0.05)
        shell = int(pid_file.read_text())
        assert _alive(shell)
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        deadline = time.monotonic() + 1
        while _alive(shell) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(shell), "the command outlived its worker"
        assert list(scratch.iterdir()) == []
    finally:
        worker.kill()
        worker.wait()
