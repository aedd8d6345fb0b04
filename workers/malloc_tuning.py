"""glibc's allocator, tuned for a long-lived worker (issue 26: memory plateaus).

Measured (bench_soak, 20 sessions, `AGENTLANE_TRACEMALLOC_FRAMES=0`): after 5 minutes glibc
held 60 MB free inside its heaps beside 67 MB in use, a quarter of the worker's RSS. The worker
allocates from many threads (the SDK's workflow executor, `asyncio.to_thread`, the Rust core's
runtime); glibc gives threads up to 8 arenas a core, each keeping what it freed. So:

* the number of arenas is capped (`AGENTLANE_MALLOC_ARENAS`, default 2; 0 leaves glibc's
  default), set before the worker starts its threads;
* free memory is handed back to the system every `AGENTLANE_MALLOC_TRIM_S` seconds (default 60;
  0: never) with `malloc_trim`, from a thread (it takes milliseconds and the arenas' locks).

Elsewhere than glibc (musl, macOS) both are skipped.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
from typing import Any

log = logging.getLogger("agentlane.worker")

M_ARENA_MAX = -8  # <malloc.h>


class MallocConfigError(ValueError):
    pass


def _libc() -> Any:
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt  # noqa: B018 - glibc only
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def _setting(name: str, default: str) -> float:
    raw = os.environ.get(f"AGENTLANE_{name}", default)
    try:
        value = float(raw)
    except ValueError:
        raise MallocConfigError(f"AGENTLANE_{name}={raw!r}: not a number") from None
    if value < 0:
        raise MallocConfigError(f"AGENTLANE_{name}={raw!r}: must be 0 or more")
    return value


def limit_arenas() -> int | None:
    """Cap glibc's arenas (before threads start); the cap set, or None when left alone."""
    arenas = int(_setting("MALLOC_ARENAS", "2"))
    libc = _libc()
    if not arenas or libc is None:
        return None
    if libc.mallopt(M_ARENA_MAX, arenas) != 1:
        log.warning("could not cap malloc arenas at %d", arenas)
        return None
    return arenas


def trim_now() -> bool:
    """Hand the heap's free pages back to the system; True when some were."""
    libc = _libc()
    return bool(libc is not None and libc.malloc_trim(0))


async def trim_forever(interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        await asyncio.to_thread(trim_now)


def start_trimming() -> asyncio.Task[None] | None:
    interval = _setting("MALLOC_TRIM_S", "60")
    if not interval or _libc() is None:
        return None
    return asyncio.create_task(trim_forever(interval))
