"""Commands whose worker was killed: found and stopped by the next worker on the host.

`setpriv --pdeathsig KILL` (activities/tools/spawn.py) kills the command a worker started when
the worker dies, but only that process: what the command started in turn (`npm run dev`, the
`sleep` of `sleep 60; echo done`, a server) is re-parented to init and runs on, unowned, though
the model was told it is gone. So every command carries its worker's identity in its environment,
inherited by all it starts (`AGENTLANE_COMMAND_OWNER=<pid>:<start time>`), and each worker looks,
when it starts and every `REAP_INTERVAL_SECONDS`, for processes whose owner no longer lives
(a pid and its start time together: a reused pid is another process) and kills them.

A command can also leave its process group while its worker lives (`setsid`, a daemonizing
server): killing the group when the call ends misses it. So a command carries its call too
(`AGENTLANE_COMMAND_CALL=<n>`, a variable of its own: a worker of an older version on the same
host reads the owner's as before and takes it for alive), and a live worker's scan also kills
what carries one of its own calls that has ended (`live_calls`: the calls whose command still
runs, activities/tools/spawn.py).
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Collection
from pathlib import Path

log = logging.getLogger("agentlane.tools.orphans")

OWNER_VAR = "AGENTLANE_COMMAND_OWNER"
CALL_VAR = "AGENTLANE_COMMAND_CALL"
REAP_INTERVAL_SECONDS = 10.0
_PROC = Path("/proc")


def _started(pid: int) -> str | None:
    """When the process started (clock ticks since boot), or None when there is none."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return fields[19]  # field 22 of stat: starttime


def _this_worker() -> str:
    return f"{os.getpid()}:{_started(os.getpid()) or '?'}"


OWNER = _this_worker()


def owner_alive(owner: str) -> bool:
    pid, _, started = owner.partition(":")
    try:
        return _started(int(pid)) == started
    except ValueError:
        return True  # not ours to judge


def _marks_of(pid: int) -> tuple[str | None, str | None]:
    """The owner and the call a process carries (None for each it does not)."""
    try:
        environ = (_PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return None, None
    owner_mark, call_mark = OWNER_VAR.encode() + b"=", CALL_VAR.encode() + b"="
    owner = call = None
    for item in environ.split(b"\0"):
        if item.startswith(owner_mark):
            owner = item[len(owner_mark) :].decode(errors="replace")
        elif item.startswith(call_mark):
            call = item[len(call_mark) :].decode(errors="replace")
    return owner, call


def reap_orphans(live_calls: Collection[str] = ()) -> list[int]:
    """Kill the commands (and what they started) of workers that are gone, and what this
    worker's ended calls left outside their process groups; their pids."""
    if not _PROC.is_dir():
        return []
    killed: list[int] = []
    alive: dict[str, bool] = {OWNER: True}
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        owner, call = _marks_of(pid)
        if owner is None:
            continue
        if owner == OWNER:
            # One of ours: left alone while its call runs. `live_calls` is read as it is now,
            # not copied: a call started during the scan is in it before its command forks.
            if call is None or call in live_calls or _started(pid) is None:
                continue
        else:
            if owner not in alive:
                alive[owner] = owner_alive(owner)
            if alive[owner] or _started(pid) is None:
                continue
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
        killed.append(pid)
    if killed:
        log.warning(
            "stopped %d processes left running by commands that ended or workers that are gone "
            "(pids %s)",
            len(killed),
            ", ".join(map(str, killed[:20])),
        )
    return killed
