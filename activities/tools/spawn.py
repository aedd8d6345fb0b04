"""Starting a tool's command without running Python in the forked child, and off the event loop.

CPython runs a `preexec_fn` between fork and exec in the child of a multi-threaded process; if
another thread held a lock at the fork (the allocator's, the import lock...), the child waits for
it forever, and the parent, blocked in `Popen._execute_child` waiting for the child's exec, waits
with it (seen once in ~4 900 execs under load: the whole worker froze, SIGTERM did nothing). So
everything the child needs comes from the spawn itself:

- its own session and process group: `start_new_session` (a `setsid()` in C, no Python);
- dying with the worker: `setpriv --pdeathsig KILL` (util-linux) in front of the command, which
  sets the parent-death signal and then execs it. The signal fires when the *thread* that forked
  ends, so every spawn happens on one long-lived thread that lives as long as the process. Where
  `setpriv` is missing the command runs without it (logged once); `kill_all` still stops every
  live group when the worker exits by itself.

The fork happens on that thread, never on the event loop's, and the exit is awaited through a
pidfd, so a slow fork (a large worker) delays only the command that asked for it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO

from activities.tools.orphans import CALL_VAR, OWNER, OWNER_VAR

log = logging.getLogger("agentlane.tools.spawn")

_SETPRIV = shutil.which("setpriv") if sys.platform == "linux" else None
# One thread, never shut down while the process lives (see the parent-death note above).
_spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentlane-spawn")
# Process groups of the commands running now, stopped by `kill_all` when the worker exits.
_live: set[int] = set()
# The markers of the calls whose command runs now (activities/tools/orphans.py): what carries
# another of this worker's markers was left behind by a call that ended.
live_calls: set[str] = set()
_call_numbers = itertools.count(1)
_warned = False


def parent_death_prefix() -> list[str]:
    """The wrapper that makes a command die with the worker; empty where there is none."""
    global _warned
    if _SETPRIV:
        return [_SETPRIV, "--pdeathsig", "KILL", "--"]
    if not _warned:
        _warned = True
        log.warning(
            "util-linux setpriv not found: a command started by exec will not die if the worker "
            "is killed with SIGKILL (it still stops on abort, timeout and worker shutdown)"
        )
    return []


class Command:
    """A started command: its own process group, its exit awaitable without blocking."""

    def __init__(self, proc: subprocess.Popen[bytes], call: str = "") -> None:
        self._proc = proc
        self.pid = proc.pid
        self.stdin = proc.stdin
        self.call = call

    @property
    def returncode(self) -> int | None:
        return self._proc.poll()

    def kill_group(self) -> None:
        """SIGKILL to the command and everything it left in its process group."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    async def wait(self) -> int:
        try:
            code = self._proc.poll()
            if code is not None:
                return code
            try:
                pidfd = os.pidfd_open(self.pid)
            except (AttributeError, OSError):
                # No pidfds (not Linux ≥ 5.3): a thread waits instead.
                return await asyncio.to_thread(self._proc.wait)
            try:
                loop = asyncio.get_running_loop()
                exited: asyncio.Future[None] = loop.create_future()

                def readable() -> None:
                    if not exited.done():
                        exited.set_result(None)

                loop.add_reader(pidfd, readable)
                try:
                    await exited
                finally:
                    loop.remove_reader(pidfd)
            finally:
                os.close(pidfd)
            # The pidfd is readable once the process has exited: this reaps without blocking.
            return self._proc.wait()
        finally:
            if self._proc.returncode is not None:
                _live.discard(self.pid)
                live_calls.discard(self.call)


async def spawn(
    argv: Sequence[str], cwd: Path, stdout: IO[bytes], stdin: int = subprocess.DEVNULL
) -> Command:
    """Start `argv` in a new session with stdout+stderr into `stdout`; stdin closed unless
    `subprocess.PIPE` is asked for (the `process` tool writes to it: `Command.stdin`)."""
    full = [*parent_death_prefix(), *argv]
    # Live before the fork: a scan meanwhile must not take the new command for a leftover.
    call = str(next(_call_numbers))
    live_calls.add(call)

    def start() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            full,
            cwd=cwd,
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # Inherited by all it starts: a worker that outlives this one stops what is left,
            # and this one stops what the call left outside its group once the call ends.
            env={**os.environ, OWNER_VAR: OWNER, CALL_VAR: call},
        )
        _live.add(proc.pid)
        return proc

    loop = asyncio.get_running_loop()
    started = loop.run_in_executor(_spawner, start)
    try:
        proc = await asyncio.shield(started)
    except asyncio.CancelledError:
        # Aborted while the fork was under way: the command must not outlive the abort.
        proc = await started
        command = Command(proc, call)
        command.kill_group()
        await command.wait()
        raise
    except BaseException:
        live_calls.discard(call)
        raise
    return Command(proc, call)


def kill_all() -> int:
    """Stop every command still running (the worker is exiting); how many groups there were."""
    groups = list(_live)
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _live.clear()
    return len(groups)
