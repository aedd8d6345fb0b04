"""SIGTERM to a busy worker (issue 26): how long it takes to exit, and whether the runs it had in
flight go on after a restart.

N sessions in a closed loop (the soak's 5-step message, offline model at zero latency) keep one
worker busy for `--busy-seconds`; then SIGTERM goes to the worker's process group while every
session has a run in flight. Printed: the time to exit, the exit code, the log's line naming
what the stop cut short, then, with a new worker started, how many of the runs in flight ended
successfully with their 4 tool calls (all of them must).

    .venv/bin/python bench/bench_sigterm.py --sessions 20 --busy-seconds 60
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentlane.run import ExecutionStatus  # noqa: E402
from bench.bench_soak import MESSAGE  # noqa: E402
from bench.common import Figures, bench_stack, fresh_key, note, workspace  # noqa: E402

CUT_SHORT = "stop cut short"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--busy-seconds", type=float, default=60)
    args = parser.parse_args()
    if os.environ.get("AGENTLANE_BENCH_QUICK") == "1":
        args.sessions, args.busy_seconds = 3, 10
    async with bench_stack("sigterm") as stack:
        dep = stack.deployment()
        worker = dep.start_worker()
        client = await stack.client(dep)
        keys = [fresh_key("term") for _ in range(args.sessions)]
        spaces = {key: workspace(dep, key) for key in keys}
        stopping = asyncio.Event()
        in_flight: dict[str, str] = {}
        sending: set[str] = set()  # a message on its way: its run starts in a moment
        finished: list[tuple[str, bool]] = []  # (run id, ended well), for the runs in flight
        completed = [0]

        async def session(key: str) -> None:
            while not stopping.is_set():
                sending.add(key)
                receipt = await client.send_and_start(key, MESSAGE, workspace=str(spaces[key]))
                assert receipt.run_id
                in_flight[key] = receipt.run_id
                sending.discard(key)
                result = await client.wait_for_run(receipt.run_id)
                del in_flight[key]
                good = result.status == ExecutionStatus.SUCCESS and result.tool_calls == 4
                if stopping.is_set():
                    finished.append((receipt.run_id, good))
                else:
                    completed[0] += 1

        tasks = [asyncio.create_task(session(key)) for key in keys]
        await asyncio.sleep(args.busy_seconds)
        stopping.set()
        busy, on_the_way = len(in_flight), len(sending)
        sent = time.monotonic()
        os.killpg(worker.pid, signal.SIGTERM)
        code = await asyncio.to_thread(worker.proc.wait, 120)
        exit_s = time.monotonic() - sent
        log = worker.log.read_text(errors="replace")
        cut = [line for line in log.splitlines() if CUT_SHORT in line]
        note(
            f"{completed[0]} runs before the signal; {busy} in flight when it came, "
            f"{on_the_way} more messages on their way"
        )
        note(f"worker exited in {exit_s:.1f} s with code {code}")
        for line in cut[:3]:
            note(f"  {line[:300]}")
        restarted = time.monotonic()
        dep.start_worker()
        await asyncio.wait_for(asyncio.gather(*tasks), 300)
        drain_s = time.monotonic() - restarted
        good = sum(ok for _, ok in finished)
        note(f"after a restart: {good} of {len(finished)} in flight ended well in {drain_s:.1f} s")
        figures = Figures()
        figures.add("sigterm_busy_runs_in_flight", busy)
        figures.add("sigterm_busy_messages_on_their_way", on_the_way)
        figures.add("sigterm_busy_exit", f"{exit_s:.1f}", "s")
        figures.add("sigterm_busy_exit_code", code if code is not None else "none")
        figures.add("sigterm_busy_runs_ended_well", f"{good}/{len(finished)}")
        figures.print()


if __name__ == "__main__":
    asyncio.run(main())
