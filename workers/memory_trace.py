"""Opt-in memory tracing for a worker that grows: what the Python heap gained, and where.

`AGENTLANE_TRACEMALLOC=<file>` starts `tracemalloc` in the worker and every
`AGENTLANE_TRACEMALLOC_MINUTES` (default 5) appends to the file: the process's RSS, the bytes
Python has allocated (traced), the source lines whose allocations grew most since the previous
dump and since the first, and the object types whose count grew most. RSS growing while the
traced bytes stay flat points outside the Python heap (the SDK's Rust core, allocator
fragmentation). `AGENTLANE_TRACEMALLOC_FRAMES` (default 1) keeps more frames per allocation (a
slower worker, and the top growth grouped by call stack too); 0 traces nothing and writes only
RSS, glibc's figures and the object counts (no cost between dumps).

Costly (tracing slows allocation, each dump holds the event loop for a moment): for diagnosis,
not for production.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import logging
import os
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import TextIO

log = logging.getLogger("agentlane.worker")


class MemoryTraceConfigError(ValueError):
    pass


TOP = 25
# Allocations of the tracing itself and of imports are noise for a growth hunt.
_NOISE = (
    tracemalloc.Filter(False, tracemalloc.__file__),
    tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
    tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>"),
    tracemalloc.Filter(False, "<unknown>"),
)


def rss_bytes() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def malloc_figures() -> str:
    """glibc's own account (every arena): bytes in use by C and Rust code (and Python's large
    objects) against bytes free inside the heap (whether or not `malloc_trim` gave their pages
    back). Free bytes that grow while use does not are fragmentation, not a leak."""
    try:
        libc = ctypes.CDLL(None)
        mallinfo2 = libc.mallinfo2
    except (OSError, AttributeError):
        return "malloc: n/a"
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    mb = 2**20
    return (
        f"malloc: in use {info.uordblks / mb:.1f} MB, free in heap {info.fordblks / mb:.1f} MB,"
        f" mmapped {info.hblkhd / mb:.1f} MB"
    )


def _type_counts() -> Counter[str]:
    return Counter(type(o).__qualname__ for o in gc.get_objects())


class MemoryTrace:
    """Snapshots and the diffs written between them (one `dump` per interval)."""

    def __init__(self, out: TextIO, frames: int) -> None:
        self.out = out
        self.frames = frames
        self.began = time.monotonic()
        self.first: tracemalloc.Snapshot | None = None
        self.previous: tracemalloc.Snapshot | None = None
        self.first_types: Counter[str] = Counter()
        self.first_rss = 0

    def dump(self) -> None:
        tracing = tracemalloc.is_tracing()
        snapshot = tracemalloc.take_snapshot().filter_traces(_NOISE) if tracing else None
        types = _type_counts()
        rss = rss_bytes()
        traced, peak = tracemalloc.get_traced_memory()
        minutes = (time.monotonic() - self.began) / 60
        w = self.out.write
        w(
            f"\n=== {minutes:.1f} min: RSS {rss / 2**20:.1f} MB"
            f" ({(rss - (self.first_rss or rss)) / 2**20:+.1f} since the first dump),"
            + (f" traced {traced / 2**20:.1f} MB (peak {peak / 2**20:.1f} MB)," if tracing else "")
            + f" {sum(types.values())} objects; {malloc_figures()}\n"
        )
        if not self.first_rss:
            self.first, self.first_types, self.first_rss = snapshot, types, rss
        else:
            if snapshot is not None and self.first is not None and self.previous is not None:
                self._diff("since the previous dump", snapshot, self.previous, "lineno")
                self._diff("since the first dump", snapshot, self.first, "lineno")
                if self.frames > 1:
                    self._diff("since the first dump, by stack", snapshot, self.first, "traceback")
            grown = [(name, n - self.first_types[name]) for name, n in types.items()]
            grown.sort(key=lambda item: -item[1])
            w("-- object counts grown since the first dump\n")
            for name, delta in grown[:TOP]:
                if delta > 0:
                    w(f"{delta:+9d}  {types[name]:9d}  {name}\n")
        self.previous = snapshot
        self.out.flush()

    def _diff(
        self, title: str, now: tracemalloc.Snapshot, then: tracemalloc.Snapshot, key: str
    ) -> None:
        stats = now.compare_to(then, key)
        w = self.out.write
        w(f"-- top growth {title}\n")
        for stat in stats[: TOP if key == "lineno" else 5]:
            if stat.size_diff <= 0:
                break
            frame = stat.traceback[0]
            w(
                f"{stat.size_diff / 1024:+10.1f} KiB {stat.count_diff:+8d} blocks"
                f"  {frame.filename}:{frame.lineno}\n"
            )
            if key == "traceback":
                for line in stat.traceback.format()[:-2]:
                    w(f"        {line}\n")


async def trace_forever(path: Path, interval: float, frames: int) -> None:
    if frames:
        tracemalloc.start(frames)
    log.warning(
        "tracemalloc on (%d frames): memory growth every %.0f s to %s", frames, interval, path
    )
    with path.open("a") as out:
        trace = MemoryTrace(out, frames)
        while True:
            # In a thread: the diffs are Python code that takes seconds with many frames, and a
            # loop held that long times out the worker's workflow tasks.
            await asyncio.to_thread(trace.dump)
            await asyncio.sleep(interval)


def start_from_env() -> asyncio.Task[None] | None:
    """The tracing task when `AGENTLANE_TRACEMALLOC` names a file; None otherwise."""
    target = os.environ.get("AGENTLANE_TRACEMALLOC")
    if not target:
        return None
    try:
        minutes = float(os.environ.get("AGENTLANE_TRACEMALLOC_MINUTES", "5"))
        frames = int(os.environ.get("AGENTLANE_TRACEMALLOC_FRAMES", "1"))
    except ValueError as err:
        raise MemoryTraceConfigError(f"AGENTLANE_TRACEMALLOC_MINUTES / _FRAMES: {err}") from err
    if minutes <= 0 or frames < 0:
        raise MemoryTraceConfigError("AGENTLANE_TRACEMALLOC_MINUTES must be > 0 and _FRAMES >= 0")
    return asyncio.create_task(trace_forever(Path(target), minutes * 60, frames))
