"""Slow file tools wait only for each other: the engine's own short calls on the default pool
still run while every tool thread is busy."""

from __future__ import annotations

import asyncio
import time

from activities.tools.tool_threads import TOOL_THREADS, in_tool_thread


async def test_busy_tools_do_not_starve_the_default_pool() -> None:
    slow = [asyncio.create_task(in_tool_thread(time.sleep, 1.5)) for _ in range(TOOL_THREADS + 4)]
    await asyncio.sleep(0.05)
    started = time.monotonic()
    answers = await asyncio.gather(*(asyncio.to_thread(lambda: 42) for _ in range(12)))
    assert answers == [42] * 12
    assert time.monotonic() - started < 0.5
    await asyncio.gather(*slow)
