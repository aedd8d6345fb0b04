"""CLI start-up (issue 22): how long `agentlane --help`, `agentlane status KEY` on an idle
session and `agentlane send KEY TEXT` to an idle session take as a user runs them (a fresh
interpreter each time), beside a bare interpreter start (`python -c pass`) in the same run.

    python bench/bench_cli.py            (from the repository root, with the venv's Python)
    python bench/bench_cli.py --runs 20  (runs per command, 10 by default)

One dev server, one worker process, the offline model. `send` is timed until the command exits
(the message accepted; no `--watch`); the session is let go idle again before the next send.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

from bench.common import (  # noqa: E402
    Figures,
    Table,
    bench_stack,
    fresh_key,
    note,
    stats_ms,
    wait_idle,
)

REPO = Path(__file__).resolve().parents[1]


def timed(argv: list[str], env: dict[str, str]) -> float:
    """Wall time of one command in a fresh interpreter; it must succeed."""
    start = time.perf_counter()
    result = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"{argv[2:]} exited {result.returncode}: {result.stderr[-2000:]}")
    return elapsed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    quick = os.environ.get("AGENTLANE_BENCH_QUICK") == "1"
    parser.add_argument("--runs", type=int, default=3 if quick else 10)
    runs = parser.parse_args().runs
    cli = [sys.executable, "-m", "clients.cli"]
    figures = Figures()
    table = Table(f"CLI wall time, {runs} runs each (ms)", ["command", "median", "p95", "- bare"])
    async with bench_stack("cli") as stack:
        dep = stack.deployment()
        dep.start_worker()
        env = dep.env()
        client = await stack.client(dep)
        key = fresh_key("cli")
        timed([*cli, "send", key, "say hi"], env)  # the session exists and is idle
        await wait_idle(client, key, runs=1)
        note(f"dev server {stack.server.address}; one worker; session {key} idle")

        bare = [timed([sys.executable, "-c", "pass"], env) for _ in range(runs)]
        help_ = [timed([*cli, "--help"], env) for _ in range(runs)]
        status = [timed([*cli, "status", key], env) for _ in range(runs)]
        send: list[float] = []
        for i in range(runs):
            send.append(timed([*cli, "send", key, f"say hi {i}"], env))
            await wait_idle(client, key, runs=i + 2)

    bare_median, _ = stats_ms(bare)
    for name, values in (
        ("python -c pass", bare),
        ("--help", help_),
        ("status", status),
        ("send", send),
    ):
        median_ms, p95_ms = stats_ms(values)
        table.add(name, median_ms, p95_ms, median_ms - bare_median)
        slug = {"python -c pass": "bare", "--help": "help"}.get(name, name)
        figures.add(f"cli_{slug}_median", median_ms, "ms")
        figures.add(f"cli_{slug}_p95", p95_ms, "ms")
    table.print()
    figures.print()


if __name__ == "__main__":
    asyncio.run(main())
