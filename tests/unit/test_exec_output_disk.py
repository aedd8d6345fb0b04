"""A command that prints far more than is kept does not fill the worker's disk: past the capture
cap the output file keeps on disk only its unread end, while the counts stay exact."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import BinaryIO

import pytest

import activities.tools.exec_tool as exec_tool
from activities.tools.exec_tool import MAX_CAPTURE_BYTES, SPOOL_BYTES, run_exec
from activities.tools.specs import ExecArgs

CHUNK = 5_000_000
CHUNKS = 60  # 300 MB in all, paced so the follower sees it grow


async def test_a_chatty_command_holds_little_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    readers: list[BinaryIO] = []
    made = exec_tool._output_file

    def spying() -> tuple[BinaryIO, BinaryIO]:
        writer, reader = made()
        readers.append(reader)
        return writer, reader

    monkeypatch.setattr(exec_tool, "_output_file", spying)
    peak = 0

    async def watch() -> None:
        nonlocal peak
        while True:
            if readers and not readers[0].closed:
                try:
                    peak = max(peak, os.fstat(readers[0].fileno()).st_blocks * 512)
                except (OSError, ValueError):
                    pass
            await asyncio.sleep(0.02)

    watching = asyncio.create_task(watch())
    command = (
        f"for i in $(seq {CHUNKS}); do head -c {CHUNK} /dev/zero | tr '\\0' x; sleep 0.05; done;"
        " echo; echo THE-END"
    )
    try:
        res = await run_exec(str(tmp_path), ExecArgs(command=command, timeout=60), lambda _: None)
    finally:
        watching.cancel()
    assert not res.is_error, res.text[:300]
    total = CHUNK * CHUNKS + len("\nTHE-END\n")
    assert f"the command wrote {total} bytes" in res.text
    assert res.text.rstrip().endswith("THE-END")
    # The capture cap, the kept end and what one follow interval lets through: not 300 MB.
    assert peak < MAX_CAPTURE_BYTES + SPOOL_BYTES + 3 * CHUNK, peak


async def test_where_disk_cannot_be_given_back_the_command_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(exec_tool, "punch_hole", lambda fd, offset, length: False)
    monkeypatch.setattr(exec_tool, "UNRELEASABLE_LIMIT_BYTES", 40 << 20)
    started = asyncio.get_running_loop().time()
    res = await run_exec(str(tmp_path), ExecArgs(command="yes", timeout=60), lambda _: None)
    assert asyncio.get_running_loop().time() - started < 30
    assert res.is_error
    assert "the command was stopped: its output passed 40 MiB" in res.text
