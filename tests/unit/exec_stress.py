"""Thousands of `exec` calls while other threads allocate and hold locks (run by
test_exec_spawn.py in its own process, so a frozen event loop fails the test instead of
freezing pytest).

Prints one JSON line: how many execs ran, how many failed, the event loop's longest stall.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

from activities.tools.exec_tool import run_exec
from activities.tools.specs import ExecArgs

CONCURRENCY = 8


def _churn(stop: threading.Event, lock: threading.Lock) -> None:
    """What a busy worker's other threads do: allocate, and hold a lock at random moments."""
    keep: list[bytes] = []
    while not stop.is_set():
        with lock:
            keep.append(bytes(64 * 1024))
            keep.extend(str(i) * 8 for i in range(200))
        if len(keep) > 2000:
            keep.clear()


async def _watch_loop(stalls: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        before = time.monotonic()
        await asyncio.sleep(0.01)
        stalls.append(time.monotonic() - before - 0.01)


async def main(total: int) -> dict[str, float]:
    stop = threading.Event()
    lock = threading.Lock()
    threads = [threading.Thread(target=_churn, args=(stop, lock), daemon=True) for _ in range(3)]
    for t in threads:
        t.start()
    stalls: list[float] = []
    done = asyncio.Event()
    watcher = asyncio.create_task(_watch_loop(stalls, done))
    failed = 0
    ran = 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as ws:
        Path(ws).mkdir(exist_ok=True)
        queue = iter(range(total))

        async def one_lane() -> None:
            nonlocal failed, ran
            for _ in queue:
                res = await run_exec(ws, ExecArgs(command="true"), lambda _: None)
                ran += 1
                if res.text != "exit code 0":
                    failed += 1
                    print(repr(res.text[:300]), file=sys.stderr)

        await asyncio.gather(*(one_lane() for _ in range(CONCURRENCY)))
    elapsed = time.monotonic() - started
    done.set()
    await watcher
    stop.set()
    return {
        "ran": ran,
        "failed": failed,
        "seconds": round(elapsed, 2),
        "max_loop_stall": round(max(stalls, default=0.0), 3),
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(int(sys.argv[1])))), flush=True)
