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
        # Killed by this scan, or by the scan of another worker of the host (the suite runs
        # several) that came first: killed either way.
        assert kept.pid not in killed
        assert orphan.wait(5) == -9
        assert kept.poll() is None
    finally:
        for proc in (orphan, kept):
            proc.kill()
            proc.wait()


async def test_what_an_ended_call_left_outside_its_group_is_stopped(tmp_path: object) -> None:
    """`setsid` takes a process out of the command's group, which is killed when the call ends:
    the scan finds it by its call's marker once the call has ended, and leaves a running call's
    own processes alone."""
    import asyncio
    from pathlib import Path

    from activities.tools import spawn
    from activities.tools.exec_tool import run_exec
    from activities.tools.specs import ExecArgs

    ws = Path(str(tmp_path))
    res = await run_exec(
        str(ws),
        ExecArgs(command="setsid sleep 1001 & sleep 0.3; echo $! > escaped.pid"),
        lambda _: None,
    )
    assert res.summary == "exit 0", res.text
    escaped = int((ws / "escaped.pid").read_text())
    running = asyncio.create_task(
        run_exec(str(ws), ExecArgs(command="sleep 1002; true", timeout=30), lambda _: None)
    )
    await asyncio.sleep(0.5)
    try:
        assert orphans._started(escaped) is not None, "setsid took it out of the group"
        killed = orphans.reap_orphans(spawn.live_calls)
        assert escaped in killed
        survivors = [p for p in killed if p != escaped]
        assert not survivors, "the running call's own command was left alone"
        assert not running.done()
    finally:
        running.cancel()
        try:
            os.kill(escaped, 9)
        except OSError:
            pass
