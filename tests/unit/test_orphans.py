"""A command left by a worker that is gone is stopped by a worker that lives
(activities/tools/orphans.py); one whose worker lives is left alone."""

from __future__ import annotations

import os
import subprocess
import time

from activities.tools import orphans


def _dead_owner() -> str:
    child = subprocess.Popen(["true"])
    started = orphans._started(child.pid)
    child.wait()
    return f"{child.pid}:{started}"


def _sleeper(owner: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "60"], env={**os.environ, orphans.OWNER_VAR: owner})


def test_a_dead_workers_command_is_killed_a_live_ones_is_not() -> None:
    orphan = _sleeper(_dead_owner())
    kept = _sleeper(orphans.OWNER)
    try:
        time.sleep(0.1)
        assert orphans.owner_alive(orphans.OWNER)
        killed = orphans.reap_orphans()
        assert orphan.pid in killed and kept.pid not in killed
        assert orphan.wait(5) == -9
        assert kept.poll() is None
    finally:
        for proc in (orphan, kept):
            proc.kill()
            proc.wait()
