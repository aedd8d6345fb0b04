"""Whether anything of a process group still runs, for tests of killing commands.

`os.killpg(pgid, 0)` also finds zombies: a killed command's orphaned children stay in the
process table until their new parent (PID 1 here, which reaps on its own schedule: a second or
two on the test machine) collects them, though they no longer run. What matters is that no
member runs, so this reads each process's state from /proc and ignores zombies (`Z`) and dead
entries (`X`).
"""

from __future__ import annotations

import time
from pathlib import Path


def running_members(pgid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def group_runs(pgid: int) -> bool:
    return bool(running_members(pgid))


def wait_group_gone(pgid: int, within: float) -> float | None:
    """Seconds until no member of the group runs, or None if some still runs after `within`."""
    started = time.monotonic()
    while True:
        if not group_runs(pgid):
            return time.monotonic() - started
        if time.monotonic() - started > within:
            return None
        time.sleep(0.01)


def running_commands(needle: str) -> list[int]:
    """Processes (not zombies) whose command line holds `needle`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if needle in cmdline and stat[stat.rindex(")") + 2 :].split()[0] not in ("Z", "X"):
            found.append(int(entry.name))
    return found
