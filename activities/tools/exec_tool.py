"""exec: a shell command in the workspace, with a timeout and captured output.

The command runs in its own process group so a timeout or an abort kills everything it started.
It is not a sandbox: the command can reach anything the worker's user can (the sandbox layer is
separate). Output is streamed to a callback as it arrives.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import sys
from collections.abc import Callable

from activities.tools.results import ToolResult, clip
from activities.tools.specs import ExecArgs
from activities.tools.workspace import workspace_root

DEFAULT_TIMEOUT_SECONDS = 120
_PR_SET_PDEATHSIG = 1


def _die_with_worker() -> None:
    """Runs in the child before exec: if the worker dies (kill -9), the command dies too.

    Otherwise a command would keep running after the run was told it was interrupted.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


async def run_exec(
    workspace: str,
    args: ExecArgs,
    on_output: Callable[[str], None],
    default_timeout: int = DEFAULT_TIMEOUT_SECONDS,
) -> ToolResult:
    root = workspace_root(workspace)
    timeout = args.timeout or default_timeout
    proc = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        args.command,
        cwd=root,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_die_with_worker if sys.platform == "linux" else None,
    )
    chunks: list[str] = []

    async def pump() -> None:
        assert proc.stdout is not None
        while True:
            data = await proc.stdout.read(4096)
            if not data:
                return
            text = data.decode("utf-8", errors="replace")
            chunks.append(text)
            on_output(text)

    pump_task = asyncio.create_task(pump())
    timed_out = False
    try:
        async with asyncio.timeout(timeout):
            await proc.wait()
    except TimeoutError:
        timed_out = True
        _kill_group(proc)
        await proc.wait()
    except asyncio.CancelledError:
        _kill_group(proc)
        await proc.wait()
        pump_task.cancel()
        raise
    await pump_task
    output = clip("".join(chunks))
    code = proc.returncode
    if timed_out:
        return ToolResult(
            f"Command timed out after {timeout}s and was killed.\n{output}",
            is_error=True,
            summary=f"timed out after {timeout}s",
        )
    return ToolResult(
        f"exit code {code}\n{output}" if output else f"exit code {code}",
        is_error=code != 0,
        summary=f"exit {code}",
    )
