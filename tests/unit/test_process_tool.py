"""process: start, poll, write, kill and list background commands; the per-session bound; a
process whose worker is gone is reported lost (with its output), never silently absent."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from activities.tools.process_output import OUTPUT_KEEP_BYTES
from activities.tools.process_tool import (
    KEEP_FINISHED,
    MAX_PER_SESSION,
    ProcessTool,
    _running,
    forget_finished,
)
from activities.tools.specs import ProcessArgs
from tests.process_groups import wait_group_gone


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def tool(tmp_path: Path) -> ProcessTool:
    return ProcessTool(f"s-{uuid.uuid4().hex[:6]}", tmp_path / "processes")


async def call(tool: ProcessTool, ws: Path, **args: object) -> str:
    res = await tool.run(str(ws), ProcessArgs.model_validate(args), uuid.uuid4().hex, False)
    return res.text


async def test_start_poll_write_kill(tool: ProcessTool, ws: Path) -> None:
    started = await call(
        tool,
        ws,
        action="start",
        command="echo ready; read line; echo got:$line; sleep 30 & wait",
    )
    assert started.startswith("Started proc-1 in the background")
    first = await call(tool, ws, action="poll", id="proc-1", wait_seconds=5)
    assert first == "proc-1 is running\nnew output:\nready\n"
    assert await call(tool, ws, action="poll", id="proc-1") == "proc-1 is running\n(no new output)"
    assert (await call(tool, ws, action="write", id="proc-1", input="hello\n")).startswith(
        "Wrote 6 characters to proc-1"
    )
    got = await call(tool, ws, action="poll", id="proc-1", wait_seconds=5)
    assert got.endswith("new output:\ngot:hello\n")
    listed = await call(tool, ws, action="list")
    assert listed.startswith("proc-1  running  echo ready")

    pgid = _running[(tool.session_key, "proc-1")].proc.pid
    began = time.monotonic()
    assert (await call(tool, ws, action="kill", id="proc-1")).startswith("Killed proc-1")
    # Gone within 1 s, with the `sleep 30` it left in its group.
    assert wait_group_gone(pgid, within=1.0 - (time.monotonic() - began)) is not None
    assert (await call(tool, ws, action="poll", id="proc-1")).startswith(
        "proc-1 was killed (exit code -9)"
    )


async def test_exit_code_and_closing_stdin(tool: ProcessTool, ws: Path) -> None:
    await call(tool, ws, action="start", command="cat; exit 3")
    await call(tool, ws, action="write", id="proc-1", input="abc", close_stdin=True)
    polled = await call(tool, ws, action="poll", id="proc-1", wait_seconds=5)
    if polled.startswith("proc-1 is running"):
        # A wait ends at the first new output; on a loaded machine `cat` may not have exited by
        # then, and the next poll reports the exit.
        assert polled == "proc-1 is running\nnew output:\nabc"
        polled = await call(tool, ws, action="poll", id="proc-1", wait_seconds=5)
        assert polled == "proc-1 exited with code 3\n(no new output)"
    else:
        assert polled == "proc-1 exited with code 3\nnew output:\nabc"


async def test_at_most_eight_run_at_once(tool: ProcessTool, ws: Path) -> None:
    for _ in range(MAX_PER_SESSION):
        assert "Started" in await call(tool, ws, action="start", command="sleep 30")
    refused = await tool.run(
        str(ws), ProcessArgs(action="start", command="sleep 1"), "x", interrupted=False
    )
    assert refused.is_error
    assert refused.text.startswith("This session already has 8 background processes running")
    await call(tool, ws, action="kill", id="proc-3")
    assert "Started proc-9" in await call(tool, ws, action="start", command="true")
    for n in range(1, 9):
        await call(tool, ws, action="kill", id=f"proc-{n}")


async def test_only_the_newest_finished_processes_are_kept_on_disk(
    tool: ProcessTool, ws: Path
) -> None:
    # A session starting a short command over and over keeps a bounded folder.
    for n in range(1, KEEP_FINISHED + 5):
        assert f"Started proc-{n} " in await call(tool, ws, action="start", command="echo hi")
        bg = _running[(tool.session_key, f"proc-{n}")]
        assert bg.waiter is not None
        await bg.waiter
    assert "Started proc-" in await call(tool, ws, action="start", command="sleep 30")
    ids = sorted(int(r["id"].removeprefix("proc-")) for r in tool.records())
    newest = KEEP_FINISHED + 5
    assert ids == list(range(newest - KEEP_FINISHED, newest + 1))
    assert len(list(tool.folder.glob("*.out"))) == KEEP_FINISHED + 1
    # A reset or close forgets the finished ones, never one still running.
    assert len(forget_finished(tool.folder)) == KEEP_FINISHED
    assert [r["id"] for r in tool.records()] == [f"proc-{newest}"]
    await call(tool, ws, action="kill", id=f"proc-{newest}")


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


async def test_a_process_of_a_worker_that_died_is_reported_lost(
    tool: ProcessTool, ws: Path
) -> None:
    tool.folder.mkdir(parents=True)
    # What a worker that was killed left: the record and the output, and a pid that is gone.
    gone = _dead_pid()
    record = {
        "id": "proc-1",
        "command": "python -m http.server",
        "worker": f"host:{gone}:dead",
        "host": os.uname().nodename,
        "pid": gone,
        "started_at": time.time(),
        "tool_call_id": "c1",
        "exit_code": None,
    }
    (tool.folder / "proc-1.json").write_text(json.dumps(record))
    (tool.folder / "proc-1.out").write_text("Serving HTTP on port 8000\n")
    res = await tool.run(str(ws), ProcessArgs(action="poll", id="proc-1"), "c2", False)
    assert res.is_error
    assert res.text.startswith("proc-1 is lost: the worker that ran it")
    assert "Serving HTTP on port 8000" in res.text
    assert "lost (its worker stopped)" in await call(tool, ws, action="list")
    unknown = await tool.run(str(ws), ProcessArgs(action="kill", id="proc-7"), "c3", False)
    assert unknown.text == "No background process proc-7 in this session (known: proc-1)."


async def test_an_interrupted_start_is_not_made_again(tool: ProcessTool, ws: Path) -> None:
    res = await tool.run(str(ws), ProcessArgs(action="start", command="touch x"), "c1", True)
    assert res.is_error and "was not run again" in res.text
    assert not (ws / "x").exists()


async def test_processes_in_another_worker_of_the_host_count_too(
    tool: ProcessTool, ws: Path
) -> None:
    tool.folder.mkdir(parents=True)
    for n in range(1, 9):
        record = {
            "id": f"proc-{n}",
            "command": "sleep 60",
            "host": os.uname().nodename,
            "pid": os.getppid(),  # a live process that is not this one: another worker
            "started_at": n,
            "exit_code": None,
        }
        (tool.folder / f"proc-{n}.json").write_text(json.dumps(record))
    refused = await tool.run(str(ws), ProcessArgs(action="start", command="true"), "c9", False)
    assert refused.is_error and refused.summary == "too many processes"


async def test_output_is_bounded_to_its_last_mib_and_the_dropped_bytes_are_counted(
    tool: ProcessTool, ws: Path
) -> None:
    total = 5_000_000
    # 5 MB of "a", then a last line: only the end is kept, and a poll says what it missed.
    command = f"head -c {total} /dev/zero | tr '\\0' a; echo; echo END"
    await call(tool, ws, action="start", command=command)
    bg = _running[(tool.session_key, "proc-1")]
    deadline = time.monotonic() + 20
    while bg.running:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    out_file = tool.folder / "proc-1.out"
    assert OUTPUT_KEEP_BYTES <= out_file.stat().st_size < 2 * OUTPUT_KEEP_BYTES
    first = await call(tool, ws, action="poll", id="proc-1")
    match = re.search(r"\[(\d+) bytes of output dropped before this: only the last 1048576", first)
    assert match, first[:300]
    dropped = int(match.group(1))
    assert dropped == total + len("\nEND\n") - out_file.stat().st_size
    shown = first.split("new output:\n", 1)[1]
    rest = int(re.search(r"\[(\d+) more bytes of output", shown).group(1))  # type: ignore[union-attr]
    polls = [shown.split("\n… [", 1)[0]]
    while rest:
        text = await call(tool, ws, action="poll", id="proc-1")
        assert "dropped" not in text  # read without falling behind again
        body = text.split("new output:\n", 1)[1]
        more = re.search(r"\n… \[(\d+) more bytes of output", body)
        rest = int(more.group(1)) if more else 0
        polls.append(body[: more.start()] if more else body)
    seen = "".join(polls)
    assert seen.endswith("a\nEND\n")
    assert dropped + len(seen) == total + len("\nEND\n")


async def test_a_slow_reader_after_a_cut_resumes_at_the_kept_tail(
    tool: ProcessTool, ws: Path
) -> None:
    # One poll reads the first bytes; then the process prints past the limit, and the next
    # poll jumps to what is kept, counting exactly the bytes in between.
    await call(tool, ws, action="start", command="echo first; read go; head -c 3000000 /dev/zero")
    assert (await call(tool, ws, action="poll", id="proc-1", wait_seconds=5)).endswith("first\n")
    await call(tool, ws, action="write", id="proc-1", input="go\n")
    bg = _running[(tool.session_key, "proc-1")]
    deadline = time.monotonic() + 20
    while bg.running:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    text = await call(tool, ws, action="poll", id="proc-1")
    kept = (tool.folder / "proc-1.out").stat().st_size
    # The 6 bytes of "first\n" were read; everything after them up to the kept tail was not.
    assert f"[{3_000_000 - kept} bytes of output dropped" in text


async def test_the_workers_to_ask_on_reset_and_what_this_one_stops(
    tool: ProcessTool, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from activities.tools import process_tool

    monkeypatch.setattr(process_tool, "_worker_queue", "q-mine")
    await call(tool, ws, action="start", command="sleep 30")
    await call(tool, ws, action="start", command="true")
    await asyncio.sleep(0.5)  # the second has exited (its record says so)
    gone = _dead_pid()
    host = os.uname().nodename
    for pid, queue, state in ((gone, "q-dead", None), (os.getppid(), "q-other", None)):
        record = {"id": f"proc-{queue}", "host": host, "pid": pid, "task_queue": queue}
        (tool.folder / f"proc-{queue}.json").write_text(json.dumps({**record, "exit_code": state}))
    queues = process_tool.owner_queues(tool.folder)
    # This worker (the running sleep) and the live other worker; not the dead one.
    assert sorted(queues) == ["q-mine", "q-other"]
    pgid = _running[(tool.session_key, "proc-1")].proc.pid
    assert await process_tool.stop_session(tool.session_key) == ["proc-1"]
    assert wait_group_gone(pgid, within=1.0) is not None
    record = json.loads((tool.folder / "proc-1.json").read_text())
    assert record["killed"] is True and record["exit_code"] == -9
    assert await process_tool.stop_session(tool.session_key) == []


async def test_nothing_of_a_finished_process_stays_open_in_the_worker(
    tool: ProcessTool, ws: Path
) -> None:
    """Each start used to leave its stdin pipe's write end (and its entry) in the worker for good:
    a long-lived worker ran out of file descriptors."""

    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    async def start_and_finish(n: int) -> None:
        text = await call(tool, ws, action="start", command=f"echo p{n}")
        pid = text.split()[1]
        done = ""
        for _ in range(20):
            done = await call(tool, ws, action="poll", id=pid, wait_seconds=1)
            if "exited with code 0" in done:
                break
        assert "exited with code 0" in done, done

    await start_and_finish(0)
    before = open_fds()
    for n in range(1, 3 * KEEP_FINISHED):
        await start_and_finish(n)
    assert open_fds() <= before + 1, (before, open_fds())
    mine = [pid for (key, pid) in _running if key == tool.session_key]
    # The newest kept finished ones (their records answer later polls), and no more.
    assert len(mine) <= KEEP_FINISHED + 1, mine


async def test_a_write_to_a_process_that_does_not_read_gives_up_without_a_thread(
    tool: ProcessTool, ws: Path
) -> None:
    """A pipe holds 64 KB: more to a process that never reads blocked a pool thread for good
    (six such writes stopped every session of the worker). The write takes what the process
    takes within a few seconds and says so; the worker's threads stay free."""
    started = await call(tool, ws, action="start", command="sleep 30")
    pid = started.split()[1]
    began = time.monotonic()
    text = await call(tool, ws, action="write", id=pid, input="x" * 300_000)
    assert time.monotonic() - began < 10
    assert "took only" in text and "of 300000 bytes" in text and "not reading its stdin" in text
    # Nothing of it holds a thread: the loop's default pool answers at once.
    assert await asyncio.wait_for(asyncio.to_thread(lambda: 1), 1) == 1
    assert (await call(tool, ws, action="kill", id=pid)).startswith("Killed")


async def test_a_start_whose_record_cannot_be_written_runs_nothing(
    tool: ProcessTool, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk: the model is told the start failed, so nothing of it may run on, untracked
    (not listed, never stopped by a reset)."""
    import activities.tools.process_tool as process_tool

    def full(path: Path, record: dict[str, object]) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(process_tool, "_write_record", full)
    marker = f"sleep 3{uuid.uuid4().int % 1000:03d}7"
    with pytest.raises(OSError, match="No space left"):
        await call(tool, ws, action="start", command=marker)
    assert not [k for k in _running if k[0] == tool.session_key]
    found = await asyncio.to_thread(
        subprocess.run, ["pgrep", "-f", marker], capture_output=True, text=True
    )
    assert found.stdout.strip() == "", found.stdout


def test_a_private_write_that_fails_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agentlane.private_files as private_files

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(private_files.os, "replace", full)
    with pytest.raises(OSError, match="No space left"):
        private_files.write_private(tmp_path / "proc-1.json", b"{}")
    assert list(tmp_path.iterdir()) == []
