"""The threads file tools run on: a pool of their own.

`asyncio.to_thread` shares the loop's default pool (cpu + 4 threads: 6 on two cores) with the
worker's own short calls (a run's tool policy, the store, a model call's folder checks). Seven
`read`s of a page deep into a huge file took all of it: unrelated sessions waited minutes and runs
failed on starved local activities. A thread cannot be cancelled, so an abort freed nothing. Here
a slow tool waits only for other tools.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

TOOL_THREADS = 8
_pool = ThreadPoolExecutor(max_workers=TOOL_THREADS, thread_name_prefix="agentlane-tool")


async def in_tool_thread(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """`asyncio.to_thread`, on the tools' pool."""
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return await loop.run_in_executor(_pool, call)
