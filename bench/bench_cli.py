"""CLI start-up (issue 22): how long `agentlane --help`, `agentlane status KEY` on an idle
session and `agentlane send KEY TEXT` to an idle session take as a user runs them (a fresh
interpreter each time), beside a bare interpreter start (`python -c pass`) in the same run.

    python bench/bench_cli.py            (from the repository root, with the venv's Python)
    python bench/bench_cli.py --runs 20  (runs per command, 10 by default)
    python bench/bench_cli.py --baseline main   (the same commands from main's tree, interleaved)

One dev server, one worker process, the offline model. `send` is timed until the command exits
(the message accepted; no `--watch`); the session is let go idle again before the next send.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

from bench.common import (  # noqa: E402
    Figures,
    Table,
    bench_stack,
    checkout,
    fresh_key,
    note,
    stats_ms,
    wait_idle,
)

REPO = Path(__file__).resolve().parents[1]


def timed(argv: list[str], env: dict[str, str], cwd: Path = REPO) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one command in a fresh interpreter; it must
    succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise RuntimeError(f"{argv[2:]} exited {result.returncode}: {result.stderr[-2000:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return elapsed, cpu


@dataclass
class Tree:
    """A source tree whose CLI is timed: this one, or an older commit's (`--baseline`)."""

    label: str
    root: Path
    times: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    def env(self, base: dict[str, str]) -> dict[str, str]:
        return {**base, "PYTHONPATH": str(self.root)}

    def run(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        cli = [sys.executable, "-m", "clients.cli"]
        got = timed([*cli, *argv], self.env(env), self.root)
        self.times.setdefault(name, []).append(got)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    quick = os.environ.get("AGENTLANE_BENCH_QUICK") == "1"
    parser.add_argument("--runs", type=int, default=3 if quick else 10)
    parser.add_argument("--baseline", help="a git revision whose CLI is timed beside this one's")
    args = parser.parse_args()
    runs = args.runs
    figures = Figures()
    table = Table(
        f"CLI wall time and CPU time, {runs} runs each, trees interleaved (ms)",
        ["command", "median", "p95", "- bare", "CPU median"],
    )
    async with bench_stack("cli") as stack:
        trees = [Tree("", REPO)]
        if args.baseline:
            trees.append(Tree(f" [{args.baseline}]", checkout(args.baseline, stack.root)))
        dep = stack.deployment()
        dep.start_worker()
        env = dep.env()
        client = await stack.client(dep)
        key = fresh_key("cli")
        trees[0].run("warm-up send", ["send", key, "say hi"], env)  # the session exists, idle
        await wait_idle(client, key, runs=1)
        note(f"dev server {stack.server.address}; one worker; session {key} idle")

        bare = [timed([sys.executable, "-c", "pass"], env) for _ in range(runs)]
        for _ in range(runs):
            for tree in trees:
                tree.run("--help", ["--help"], env)
        for _ in range(runs):
            for tree in trees:
                tree.run("status", ["status", key], env)
        sent = 1
        for i in range(runs):
            for tree in trees:
                tree.run("send", ["send", key, f"say hi {i}"], env)
                sent += 1
                await wait_idle(client, key, runs=sent)

    bare_median, _ = stats_ms([wall for wall, _ in bare])
    rows = [("python -c pass", "", bare)]
    for name in ("--help", "status", "send"):
        rows += [(name, tree.label, tree.times[name]) for tree in trees]
    for name, label, values in rows:
        median_ms, p95_ms = stats_ms([wall for wall, _ in values])
        cpu_ms, _ = stats_ms([cpu for _, cpu in values])
        table.add(name + label, median_ms, p95_ms, median_ms - bare_median, cpu_ms)
        slug = {"python -c pass": "bare", "--help": "help"}.get(name, name) + label.replace(
            " ", "_"
        )
        figures.add(f"cli_{slug}_median", median_ms, "ms")
        figures.add(f"cli_{slug}_p95", p95_ms, "ms")
        figures.add(f"cli_{slug}_cpu_median", cpu_ms, "ms")
    table.print()
    note(f"load on the machine: {os.getloadavg()[0]:.1f} (1 min) on {os.cpu_count()} cores")
    figures.print()


if __name__ == "__main__":
    asyncio.run(main())
