"""New sessions in bulk (issue 22): N new sessions with one message each from S concurrent
senders: accepted per second, accept p50/p99, when the last run was done, nothing lost or
duplicated; beside one new session on an otherwise idle worker in the same run.

    python bench/bench_new_sessions.py                      (1 000 sessions, 50 senders)
    python bench/bench_new_sessions.py --baseline main      (main's tree first, then this one)

One dev server, one worker process, the offline model at zero latency (what `bench_control`
measures as its last part, alone). With `--baseline REV` this script runs first from a checkout
of REV (its client, worker and workflows), on its own dev server, then from this tree, and prints
both side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

from bench.bench_control import many_sessions  # noqa: E402
from bench.common import (  # noqa: E402
    baseline_options,
    bench_stack,
    beside_baseline,
    cpu_seconds,
    fresh_key,
    median,
    pct,
    wait_idle,
)


async def measure(sessions: int, senders: int) -> dict[str, float]:
    async with bench_stack("new-sessions") as stack:
        dep = stack.deployment()
        dep.start_worker()
        client = await stack.client(dep)
        idle: list[float] = []
        for _ in range(5):
            key = fresh_key("one")
            began = time.perf_counter()
            await client.send(key, "say hi")
            idle.append(time.perf_counter() - began)
            await wait_idle(client, key, runs=1)
        # Where the accepting goes, on 2 shared cores: the worker, the dev server and this
        # process (the senders' client), CPU from /proc over the sends alone.
        pids = {"worker": dep.workers[0].pid, "server": stack.server.pid(), "senders": os.getpid()}
        before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        spent: dict[str, float] = {}

        def sent() -> None:
            spent.update({name: cpu_seconds(pid) - before[name] for name, pid in pids.items()})

        _, burst = await many_sessions(client, dep, sessions, senders, on_sent=sent)
        lat = [s * 1000 for s in burst.latencies]
        per = 1000 / max(1, burst.accepted)
        return {
            "accepted": float(burst.accepted),
            "accepted_per_s": burst.accepted / burst.wall_s,
            "accept_p50_ms": median(lat),
            "accept_p99_ms": pct(lat, 0.99),
            "all_done_s": burst.wall_s + burst.drain_s,
            "lost": float(len(burst.lost)),
            "duplicated": float(len(burst.duplicated)),
            "caller_exceptions": float(sum(burst.errors.values())),
            "idle_new_session_ms": median(idle) * 1000,
            **{f"accept_cpu_ms_{name}": spent[name] * per for name in pids},
            "accept_cpu_ms_total": sum(spent.values()) * per,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--senders", type=int, default=50)
    baseline_options(parser)
    args = parser.parse_args()
    runs = beside_baseline(
        f"{args.sessions} new sessions, one message each, {args.senders} concurrent senders",
        lambda: asyncio.run(measure(args.sessions, args.senders)),
        script=Path(__file__),
        script_args=["--sessions", str(args.sessions), "--senders", str(args.senders)],
        baseline=args.baseline,
        result_only=args.result_only,
    )
    for label, r in runs:
        print(
            f"{label}: accept p50 {r['accept_p50_ms']:.0f} ms = "
            f"{r['accept_p50_ms'] / r['idle_new_session_ms']:.1f}x one new session on an idle "
            f"worker ({r['idle_new_session_ms']:.0f} ms)"
        )


if __name__ == "__main__":
    main()
