"""One session, a burst of messages from many senders (the burst of `bench_control`, alone),
against the code at a baseline revision in the same run.

    python bench/bench_burst.py [--messages 1000] [--senders 50] [--baseline REV]

With `--baseline REV` this script first runs from a checkout of REV (its client, worker and
workflows; this measuring code), on its own dev server, then from this tree.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

from bench.bench_control import one_session_burst  # noqa: E402
from bench.common import baseline_options, bench_stack, beside_baseline, pct  # noqa: E402


async def measure(messages: int, senders: int) -> dict[str, float]:
    async with bench_stack("burst") as stack:
        dep = stack.deployment()
        dep.start_worker()
        client = await stack.client(dep)
        _, burst = await one_session_burst(client, dep, messages, senders)
        lat = [s * 1000 for s in burst.latencies]
        return {
            "accepted": float(burst.accepted),
            "accepted_per_s": burst.accepted / burst.wall_s,
            "accept_p50_ms": pct(lat, 0.5),
            "accept_p99_ms": pct(lat, 0.99),
            "accept_max_ms": max(lat),
            "all_handled_s": burst.wall_s + burst.drain_s,
            "lost": float(len(burst.lost)),
            "duplicated": float(len(burst.duplicated)),
            "caller_exceptions": float(sum(burst.errors.values())),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--senders", type=int, default=50)
    baseline_options(parser)
    args = parser.parse_args()
    beside_baseline(
        f"1 session, {args.messages} messages (followup) from {args.senders} concurrent senders",
        lambda: asyncio.run(measure(args.messages, args.senders)),
        script=Path(__file__),
        script_args=["--messages", str(args.messages), "--senders", str(args.senders)],
        baseline=args.baseline,
        result_only=args.result_only,
    )


if __name__ == "__main__":
    main()
