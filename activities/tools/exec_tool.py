"""exec: a shell command in the workspace, with a timeout and captured output.

The command runs in its own process group. When its shell exits, times out or is aborted,
whatever it left running in that group is stopped too, and if the worker itself dies the shell
dies with it (activities/tools/spawn.py: no Python code runs in the forked child, and the fork
is off the event loop). Output goes to a file the activity follows and streams to a callback as
it grows. It is not a sandbox: the command can reach anything the worker's user can (the
sandbox layer is separate).
"""

from __future__ import annotations

import asyncio
import codecs
import os
import tempfile
from collections.abc import Callable
from typing import BinaryIO

from activities.tools.file_holes import punch_hole
from activities.tools.results import MAX_RESULT_CHARS, ToolResult, clip
from activities.tools.spawn import spawn
from activities.tools.specs import ExecArgs
from activities.tools.workspace import workspace_root

DEFAULT_TIMEOUT_SECONDS = 120
# Output beyond this is not read (the result keeps the head and tail of what was).
MAX_CAPTURE_BYTES = 10_000_000
# Past the cap, the end of the output is read back from the file and shown.
TAIL_BYTES = MAX_RESULT_CHARS // 2
FOLLOW_INTERVAL_SECONDS = 0.1
# Past the cap, what the command goes on writing is released from the disk as it comes (a hole
# punched in the file, its size kept), all but the last SPOOL_BYTES: `yes` for two minutes
# would otherwise put ~80 GB on the worker's disk, beside Temporal's database and the store.
SPOOL_BYTES = 4 << 20
BOUND_INTERVAL_SECONDS = 0.02
# Where the filesystem cannot release a stretch of a file, a command whose output passes this
# is stopped instead (said in its result).
UNRELEASABLE_LIMIT_BYTES = 256 << 20


class _OutputFollower:
    """Reads what the command writes to its output file as it grows.

    A file rather than a pipe: a background process the command leaves behind cannot hold the
    tool open by keeping a pipe's write end.
    """

    def __init__(
        self, file: BinaryIO, on_output: Callable[[str], None], stop: Callable[[], None]
    ) -> None:
        self._file = file
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._on_output = on_output
        self._stop = stop
        self.chunks: list[str] = []
        self.size = 0
        self.total = 0
        self.last = ""
        # Bytes from the start of the file whose disk was given back (past the cap).
        self.released = 0
        self.releasable = True
        self.stopped_at: int | None = None

    def read_new(self) -> bool:
        """Read what arrived (1 MiB at most per call); False when there was nothing to read."""
        room = MAX_CAPTURE_BYTES - self.size
        if room <= 0:
            return False
        data = self._file.read(min(room, 1 << 20))
        if not data:
            return False
        self.size += len(data)
        text = self._decoder.decode(data)
        if text:
            self.chunks.append(text)
            self._on_output(text)
        return True

    async def follow(self) -> None:
        while True:
            # Caught up each interval, a MiB at a time with the loop let through between:
            # what waits unread on disk is one interval's output, whatever the command's pace.
            for _ in range(MAX_CAPTURE_BYTES >> 20):
                if not self.read_new():
                    break
                await asyncio.sleep(0)
            if self.size < MAX_CAPTURE_BYTES:
                await asyncio.sleep(FOLLOW_INTERVAL_SECONDS)
                continue
            # Two system calls a time: often enough that `yes` holds a few dozen MB, not GBs.
            self.bound_disk()
            await asyncio.sleep(BOUND_INTERVAL_SECONDS)

    def bound_disk(self) -> None:
        """Past the cap: give back the disk of everything but the last SPOOL_BYTES written."""
        written = os.fstat(self._file.fileno()).st_size
        keep_from = max(self.size, written - SPOOL_BYTES)
        if self.releasable and keep_from > self.released:
            if punch_hole(self._file.fileno(), self.released, keep_from - self.released):
                self.released = keep_from
                return
            self.releasable = False
        if not self.releasable and written > UNRELEASABLE_LIMIT_BYTES and self.stopped_at is None:
            self.stopped_at = written
            self._stop()

    def close(self) -> None:
        # Everything the command wrote before it ended, up to the cap (a command that printed
        # 20 MB in a blink must not be cut at the first MiB).
        while self.read_new():
            pass
        tail = self._decoder.decode(b"", final=True)
        if tail:
            self.chunks.append(tail)
            self._on_output(tail)
        self.total = os.fstat(self._file.fileno()).st_size
        if self.total > self.size:
            # Past the cap: keep the real end of the output, which is what usually matters.
            self._file.seek(max(self.size, self.total - TAIL_BYTES))
            self.last = self._file.read().decode("utf-8", errors="replace")
        self._file.close()

    def output(self) -> str:
        """The output as the model sees it; every omission counted exactly."""
        text = "".join(self.chunks)
        if self.total <= self.size:
            return clip(text)
        head = text[: MAX_RESULT_CHARS // 2]
        shown = len(head.encode("utf-8")) + len(self.last.encode("utf-8"))
        stopped = (
            f"\n[the command was stopped: its output passed {UNRELEASABLE_LIMIT_BYTES >> 20} MiB "
            "and this filesystem cannot give back the part not kept]"
            if self.stopped_at is not None
            else ""
        )
        return (
            f"{head}\n… [{self.total - shown} bytes omitted; the command wrote {self.total} "
            f"bytes] …\n{self.last}{stopped}"
        )


def _output_file() -> tuple[BinaryIO, BinaryIO]:
    """A writer for the command and a reader for the activity, on a file with no name.

    Unlinked at once, so nothing is left in the temporary folder when the worker is killed in
    the middle of a command (a named scratch folder was, once per kill -9); the kernel frees
    the file when the command and the reader have both closed it.
    """
    fd, name = tempfile.mkstemp(prefix="agentlane-exec-")
    try:
        # Opened for writing too, which giving back disk space (a punched hole) requires;
        # nothing is written through it.
        reader = open(name, "r+b")  # noqa: SIM115 - closed by _OutputFollower.close
    finally:
        os.unlink(name)
    return os.fdopen(fd, "wb"), reader


async def run_exec(
    workspace: str,
    args: ExecArgs,
    on_output: Callable[[str], None],
    default_timeout: int = DEFAULT_TIMEOUT_SECONDS,
) -> ToolResult:
    root = workspace_root(workspace)
    timeout = args.timeout or default_timeout
    writer, reader = _output_file()
    try:
        with writer:
            proc = await spawn(["bash", "-c", args.command], cwd=root, stdout=writer)
    except BaseException:
        reader.close()
        raise
    follower = _OutputFollower(reader, on_output, proc.kill_group)
    following = asyncio.create_task(follower.follow())
    timed_out = False
    try:
        async with asyncio.timeout(timeout):
            await proc.wait()
    except TimeoutError:
        timed_out = True
    finally:
        # Whatever the command started and left running in its process group stops with
        # it (also on timeout and on cancellation).
        proc.kill_group()
        if proc.returncode is None:
            await proc.wait()
        following.cancel()
        follower.close()
    output = follower.output()
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
