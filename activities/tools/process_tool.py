"""process: background commands of a session (SPEC §13.1 `group:runtime`).

`start` runs a shell command in the background (its own process group, stdin a pipe, output to
a file beside the session's transcript, of which the last MiB is kept:
`activities/tools/process_output.py`) and returns at once with its id; `poll` returns the
output printed since the last poll and the exit code once it has one (optionally waiting up to
`wait_seconds` for either); `write` sends text to its stdin; `kill` stops its whole process
group; `list` shows the session's processes. At most `MAX_PER_SESSION` run at once per session.

Where a process lives, said plainly: in the worker process that started it, which it never
outlives (it is spawned like `exec`: `activities/tools/spawn.py`, so a worker killed with -9
takes it along, and a worker that stops stops it). Each process has a record in the session's
folder; a call about a process whose worker is gone finds the record and reports the process
**lost** (with the output it printed up to then), never silently absent. A `start` whose
attempt was interrupted is not started again (the model is told, like `exec`).
"""

from __future__ import annotations

import asyncio
import codecs
import json
import os
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from activities.tools.process_output import OUTPUT_KEEP_BYTES, BoundedOutput
from activities.tools.results import ToolResult
from activities.tools.spawn import Command, spawn
from activities.tools.specs import ProcessArgs
from activities.tools.workspace import workspace_root
from agentlane.private_files import make_private_dir, write_private

MAX_PER_SESSION = 8
# Finished processes whose record and output a session keeps (the newest); older ones go at
# the next start, and all of them when the session is reset or closed: a session that starts
# a build a minute does not grow the data dir by an output file each time, for ever.
KEEP_FINISHED = 8
# What one poll returns at most; the rest waits for the next poll.
POLL_BYTES = 32 * 1024
POLL_INTERVAL_SECONDS = 0.1
# After a process exits, how long its last output may take to come through the pipe.
EXIT_DRAIN_SECONDS = 1.0
# How long a `write` waits for a process to take its input (a pipe holds 64 KB).
STDIN_WRITE_SECONDS = 5.0
_WRITE_CHUNK = 64 * 1024

HOST = socket.gethostname()
# This worker process, as process records name it.
WORKER_ID = f"{HOST}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
# The task queue only this worker process polls (set by the worker at start): calls about a
# process it holds are routed there by the run (`owner_queue`).
_worker_queue = ""


def set_worker_queue(queue: str) -> None:
    global _worker_queue
    _worker_queue = queue


def owner_queue(folder: Path, arguments: dict[str, Any]) -> str:
    """The task queue of the worker holding the process a `process` call is about, when the
    process still runs by its record; "" when the call can go to any worker."""
    if arguments.get("action") not in ("poll", "write", "kill"):
        return ""
    pid = arguments.get("id")
    if not isinstance(pid, str) or "/" in pid or not pid:
        return ""
    try:
        record = json.loads((folder / f"{pid}.json").read_text())
    except (OSError, ValueError):
        return ""
    if not isinstance(record, dict) or record.get("exit_code") is not None:
        return ""
    owner = int(record.get("pid", 0))
    if record.get("host") == HOST and owner != os.getpid() and not _alive(owner):
        # Its worker is known gone (this host's process table says so): any worker answers
        # "lost" at once, where a call routed to its queue would wait for nobody.
        return ""
    return str(record.get("task_queue") or "")


def owner_queues(folder: Path) -> list[str]:
    """The task queues of the live workers holding a running process of the session whose
    records are in `folder` (a worker known to be gone on this host is left out: its processes
    died with it)."""
    queues: list[str] = []
    for record in ProcessTool("", folder).records():
        if record.get("exit_code") is not None or not record.get("task_queue"):
            continue
        pid = int(record.get("pid", 0))
        mine = pid == os.getpid()
        if record.get("host") == HOST and not mine and not _alive(pid):
            continue
        if str(record["task_queue"]) not in queues:
            queues.append(str(record["task_queue"]))
    return queues


async def stop_session(session_key: str) -> list[str]:
    """Kill every running background process of the session held by this worker (its whole
    process group); the ids killed."""
    victims = [bg for (key, _), bg in _running.items() if key == session_key and bg.running]
    for bg in victims:
        bg.killed = True
        bg.proc.kill_group()
    for bg in victims:
        if bg.waiter is not None:
            await asyncio.shield(bg.waiter)  # its record says it was killed
    return [bg.id for bg in victims]


@dataclass
class Background:
    id: str
    session_key: str
    command: str
    proc: Command
    output: BoundedOutput
    record_path: Path
    read_offset: int = 0
    exit_code: int | None = None
    killed: bool = False
    decoder: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="replace")
    )
    waiter: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def running(self) -> bool:
        return self.exit_code is None


# Every background process this worker process started, by (session key, id).
_running: dict[tuple[str, str], Background] = {}


def _write_record(path: Path, record: dict[str, Any]) -> None:
    write_private(path, json.dumps(record).encode())


def _number(record: dict[str, Any]) -> int:
    try:
        return int(str(record.get("id", "")).removeprefix("proc-"))
    except ValueError:
        return 0


def forget_finished(folder: Path, keep: int = 0) -> list[str]:
    """Delete the records and output of the session's finished processes but the newest
    `keep`; the ids forgotten. A running process (here or on another worker) is kept."""
    finished = [r for r in ProcessTool("", folder).records() if r.get("exit_code") is not None]
    finished.sort(key=_number)
    gone = finished[: max(0, len(finished) - keep)]
    for record in gone:
        pid = str(record.get("id", ""))
        if not pid or "/" in pid:
            continue
        for suffix in (".out", ".json"):
            (folder / f"{pid}{suffix}").unlink(missing_ok=True)
    return [str(r.get("id")) for r in gone]


def prune_forgotten(session_key: str) -> None:
    """Let go of this worker's finished processes of the session whose records were forgotten
    (`forget_finished`): nothing of a process outlives its record here (its stdin pipe was
    closed when it exited; this drops the rest)."""
    for (key, pid), bg in list(_running.items()):
        if key == session_key and not bg.running and not bg.record_path.exists():
            del _running[(key, pid)]


async def forget(session_key: str, folder: Path, keep: int = 0) -> list[str]:
    """`forget_finished` off the event loop, then what this worker held of those processes."""
    gone = await asyncio.to_thread(forget_finished, folder, keep)
    prune_forgotten(session_key)
    return gone


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _write_within(fd: int, data: bytes, seconds: float) -> int:
    """Write `data` to a pipe without blocking a thread: as much as the reader takes within
    `seconds`; the bytes written."""
    os.set_blocking(fd, False)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    sent = 0
    while sent < len(data):
        try:
            sent += os.write(fd, data[sent : sent + _WRITE_CHUNK])
            continue
        except BlockingIOError:
            pass
        left = deadline - loop.time()
        if left <= 0:
            break
        writable: asyncio.Future[None] = loop.create_future()
        loop.add_writer(fd, _settle, writable)
        try:
            await asyncio.wait_for(writable, left)
        except TimeoutError:
            break
        finally:
            loop.remove_writer(fd)
    return sent


def _close_stdin(bg: Background) -> None:
    stdin = bg.proc.stdin
    if stdin is None or stdin.closed:
        return
    try:
        stdin.close()
    except OSError:  # unflushed input to a process that is gone
        pass


def _record(bg: Background, started_at: float, tool_call_id: str) -> dict[str, Any]:
    return {
        "id": bg.id,
        "command": bg.command,
        "worker": WORKER_ID,
        "host": HOST,
        "pid": os.getpid(),
        "process_pid": bg.proc.pid,
        "started_at": started_at,
        "tool_call_id": tool_call_id,
        "task_queue": _worker_queue,
        "exit_code": bg.exit_code,
        "killed": bg.killed,
    }


class ProcessTool:
    """One session's view of the background processes; `folder` is the session's
    `processes/` folder in the transcript store."""

    def __init__(self, session_key: str, folder: Path) -> None:
        self.session_key = session_key
        self.folder = folder

    def records(self) -> list[dict[str, Any]]:
        return self._records()

    def _records(self) -> list[dict[str, Any]]:
        if not self.folder.is_dir():
            return []
        found = []
        for path in sorted(self.folder.glob("*.json")):
            try:
                found.append(json.loads(path.read_text()))
            except (OSError, ValueError):
                continue
        return sorted(found, key=lambda r: float(r.get("started_at", 0)))

    def _mine(self) -> list[Background]:
        return [bg for (key, _), bg in _running.items() if key == self.session_key]

    async def run(
        self,
        workspace: str,
        args: ProcessArgs,
        tool_call_id: str,
        interrupted: bool,
        owner_gone: bool = False,
    ) -> ToolResult:
        if args.action == "start":
            return await self.start(workspace, args, tool_call_id, interrupted)
        if args.action == "list":
            return self.list()
        if not args.id:
            return ToolResult(f"process {args.action} needs the process id", is_error=True)
        bg = _running.get((self.session_key, args.id))
        if bg is None:
            return self._not_here(args.id, owner_gone)
        if args.action == "poll":
            return await self.poll(bg, args.wait_seconds)
        if args.action == "write":
            return await self.write(bg, args.input or "", args.close_stdin)
        return await self.kill(bg)

    async def start(
        self, workspace: str, args: ProcessArgs, tool_call_id: str, interrupted: bool
    ) -> ToolResult:
        if not args.command or not args.command.strip():
            return ToolResult("process start needs a command", is_error=True)
        if interrupted:
            started = next(
                (r for r in self._records() if r.get("tool_call_id") == tool_call_id), None
            )
            named = f" (it was {started['id']})" if started else ""
            return ToolResult(
                "The start was interrupted (the worker running it stopped) and was not run "
                f"again{named}; a process it started stopped with that worker. Start it again "
                "if you still need it.",
                is_error=True,
                summary="interrupted",
            )
        running = [(bg.id, bg.command) for bg in self._mine() if bg.running]
        # The session's processes in other worker processes of this host count too.
        running += [
            (str(r.get("id")), str(r.get("command", "")))
            for r in self._records()
            if r.get("exit_code") is None
            and (self.session_key, str(r.get("id"))) not in _running
            and r.get("host") == HOST
            and _alive(int(r.get("pid", 0)))
        ]
        if len(running) >= MAX_PER_SESSION:
            listed = ", ".join(f"{pid} (`{command[:40]}`)" for pid, command in running)
            return ToolResult(
                f"This session already has {MAX_PER_SESSION} background processes running "
                f"(the most it may have): {listed}. Kill one first.",
                is_error=True,
                summary="too many processes",
            )
        root = workspace_root(workspace)
        make_private_dir(self.folder)
        await forget(self.session_key, self.folder, KEEP_FINISHED)
        # Numbered on from the newest kept (never reusing an id a kept record has).
        pid = f"proc-{max((_number(r) for r in self._records()), default=0) + 1}"
        out_path = self.folder / f"{pid}.out"
        record_path = self.folder / f"{pid}.json"
        started_at = time.time()
        output = BoundedOutput(out_path)
        try:
            proc = await spawn(
                ["bash", "-c", args.command],
                cwd=root,
                stdout=output.writer,
                stdin=subprocess.PIPE,
            )
        except BaseException:
            output.close()
            raise
        output.follow()
        bg = Background(pid, self.session_key, args.command, proc, output, record_path)
        _running[(self.session_key, pid)] = bg
        try:
            await asyncio.to_thread(
                _write_record, record_path, _record(bg, started_at, tool_call_id)
            )
        except BaseException:
            # Untracked, it would run on with no handle (not listed, never stopped by a reset)
            # while the model is told it did not start: it does not start.
            del _running[(self.session_key, pid)]
            proc.kill_group()
            await asyncio.shield(proc.wait())
            output.close()
            _close_stdin(bg)
            raise

        async def wait_exit() -> None:
            code = await proc.wait()
            try:
                # What it printed last is still in the pipe; a process it left outside its
                # group may hold the pipe open, so not forever.
                await asyncio.wait_for(output.eof.wait(), EXIT_DRAIN_SECONDS)
            except TimeoutError:
                pass
            bg.exit_code = code
            # Its pipe's write end would otherwise stay open in this worker for good: one file
            # descriptor per process ever started, until "Too many open files".
            _close_stdin(bg)
            record = _record(bg, started_at, tool_call_id)
            await asyncio.to_thread(_write_record, record_path, record)

        bg.waiter = asyncio.get_running_loop().create_task(wait_exit())
        return ToolResult(
            f"Started {pid} in the background: {args.command}\nPoll it with "
            f'{{"action": "poll", "id": "{pid}"}}.',
            summary=f"started {pid}",
        )

    def _new_output(self, bg: Background) -> tuple[str, int, int]:
        """The output since the last poll (at most `POLL_BYTES`), the bytes of it that were
        dropped (beyond the kept tail), and how much more is kept. On the event loop, like the
        reader that appends to (and cuts) the file."""
        chunk = bg.output.read(bg.read_offset, POLL_BYTES)
        if chunk.skipped:
            # Reading resumes mid-stream: a character cut there is replaced, not carried.
            bg.decoder.reset()
        bg.read_offset += chunk.skipped + len(chunk.data)
        # Incremental: a UTF-8 character split between two polls comes out whole.
        final = not bg.running and bg.output.eof.is_set() and chunk.rest <= 0
        return bg.decoder.decode(chunk.data, final=final), chunk.skipped, chunk.rest

    async def poll(self, bg: Background, wait_seconds: float) -> ToolResult:
        deadline = time.monotonic() + wait_seconds
        # The output is a file (see exec): its growth is checked on a short tick.
        while time.monotonic() < deadline:
            if not bg.running or bg.output.total > bg.read_offset:
                break
            await asyncio.sleep(POLL_INTERVAL_SECONDS)
        if not bg.running and bg.waiter is not None:
            await asyncio.shield(bg.waiter)  # the record says it exited too
        output, skipped, rest = self._new_output(bg)
        if bg.running:
            state = f"{bg.id} is running"
        elif bg.killed:
            state = f"{bg.id} was killed (exit code {bg.exit_code})"
        else:
            state = f"{bg.id} exited with code {bg.exit_code}"
        more = f"\n… [{rest} more bytes of output; poll again for them]" if rest else ""
        body = f"\nnew output:\n{output}" if output else "\n(no new output)"
        lost = (
            f"\n… [{skipped} bytes of output dropped before this: only the last "
            f"{OUTPUT_KEEP_BYTES} bytes of a process's output are kept; poll more often]"
            if skipped
            else ""
        )
        return ToolResult(state + lost + body + more, summary=state)

    async def write(self, bg: Background, text: str, close: bool) -> ToolResult:
        stdin = bg.proc.stdin
        if not bg.running:
            return ToolResult(f"{bg.id} has exited; nothing can be written to it", is_error=True)
        if stdin is None or stdin.closed:
            return ToolResult(f"the stdin of {bg.id} is closed", is_error=True)

        data = text.encode("utf-8")
        try:
            sent = await _write_within(stdin.fileno(), data, STDIN_WRITE_SECONDS)
        except BrokenPipeError:
            return ToolResult(f"{bg.id} no longer reads its stdin", is_error=True)
        if sent < len(data):
            # Not a thread blocked for good on a full pipe: six of those stopped every session
            # of the worker.
            return ToolResult(
                f"{bg.id} took only {sent} of {len(data)} bytes within "
                f"{STDIN_WRITE_SECONDS:g} s: it is not reading its stdin (the rest was not "
                "sent). Poll it to see what it does, or kill it.",
                is_error=True,
                summary=f"stdin of {bg.id} full",
            )
        if close:
            _close_stdin(bg)
        closed = " and closed its stdin" if close else ""
        return ToolResult(
            f"Wrote {len(text)} characters to {bg.id}{closed}.", summary=f"wrote to {bg.id}"
        )

    async def kill(self, bg: Background) -> ToolResult:
        if not bg.running:
            return ToolResult(f"{bg.id} had already exited with code {bg.exit_code}.")
        bg.killed = True
        bg.proc.kill_group()
        if bg.waiter is not None:
            await asyncio.shield(bg.waiter)
        return ToolResult(f"Killed {bg.id} (exit code {bg.exit_code}).", summary=f"killed {bg.id}")

    def list(self) -> ToolResult:
        records = self._records()
        if not records:
            return ToolResult("This session has no background processes.", summary="none")
        lines = []
        for record in records:
            bg = _running.get((self.session_key, str(record.get("id"))))
            if bg is not None:
                state = "running" if bg.running else f"exited {bg.exit_code}"
            elif record.get("exit_code") is not None:
                state = f"exited {record['exit_code']}"
            else:
                state = self._state_elsewhere(record)
            lines.append(f"{record.get('id')}  {state}  {record.get('command', '')}")
        return ToolResult("\n".join(lines), summary=f"{len(records)} processes")

    @staticmethod
    def _state_elsewhere(record: dict[str, Any]) -> str:
        if record.get("host") != HOST:
            return f"running in a worker on {record.get('host')} (poll it for its state)"
        if _alive(int(record.get("pid", 0))):
            return f"running in another worker (pid {record.get('pid')})"
        return "lost (its worker stopped)"

    def _not_here(self, pid: str, owner_gone: bool = False) -> ToolResult:
        record = next((r for r in self._records() if r.get("id") == pid), None)
        if record is None:
            known = ", ".join(str(r.get("id")) for r in self._records()) or "none"
            return ToolResult(
                f"No background process {pid} in this session (known: {known}).", is_error=True
            )
        if record.get("exit_code") is not None:
            output = self._tail(pid)
            return ToolResult(
                f"{pid} exited with code {record['exit_code']}.\noutput (end):\n{output}",
                summary=f"{pid} exited",
            )
        elsewhere = record.get("host") != HOST or _alive(int(record.get("pid", 0)))
        if elsewhere and not owner_gone:
            # Only when the call was not routed to the process's worker (a record from a worker
            # without its own queue); a routed call lands there or finds the worker gone.
            return ToolResult(
                f"{pid} runs in another worker process ({record.get('worker')}), which this "
                "call cannot reach. Try again.",
                is_error=True,
                summary="in another worker",
            )
        return ToolResult(
            f"{pid} is lost: the worker that ran it ({record.get('worker')}) stopped, and the "
            f"process stopped with it. Command: {record.get('command')}\n"
            f"Its output up to then (end):\n{self._tail(pid)}",
            is_error=True,
            summary=f"{pid} lost",
        )

    def _tail(self, pid: str) -> str:
        path = self.folder / f"{pid}.out"
        if not path.exists():
            return "(none)"
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - POLL_BYTES))
            return f.read().decode("utf-8", errors="replace") or "(none)"


def _alive(pid: int) -> bool:
    if pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
