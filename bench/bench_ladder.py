"""Load ladder: 1, 20, 100, 300, 500 sessions busy at once, one level after another (issue 26).

Each session sends the soak's 5-step message (read, write, exec `true`, read, reply; offline
model at zero latency) as soon as its previous run ended. Each level gets a fresh worker on the
same dev server; once every session has finished a run (or after `--warmup-cap` seconds, 600)
it is measured for `--seconds`: steps/s (a step is one model call and what it asked for: 5 a
run), step p50/p99 (from the histories of 1 run in `--sample`: one model call's scheduling to
the next, the last to the run's end), accept p50/p99 (`send_and_start` returned: the message is
in the session; every send of the level, the warm-up's included), run p50, the worker's and the
server's CPU per step, the worker's RSS at the end of the level and its workflow tasks over 1 s
(TMPRL1104, by workflow type).

A level can carry its own window and worker settings: `20x600` measures 20 sessions for 10
minutes (noting the worker's RSS every `--rss-every` seconds), `300:AGENTLANE_MAX_WORKFLOW_TASKS=8`
runs 300 sessions on a worker started with that variable.

    .venv/bin/python bench/bench_ladder.py --levels 1,20,100,300,500 --seconds 60
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentlane.run import ExecutionStatus  # noqa: E402
from bench.bench_soak import (  # noqa: E402
    MESSAGE,
    TASK_WARN_SECONDS,
    cpu_seconds,
    pct,
    rss_mb,
    slow_tasks,
)
from bench.common import (  # noqa: E402
    ET,
    Stack,
    Table,
    bench_stack,
    events_of_type,
    fresh_key,
    note,
    ts,
    workspace,
)
from clients.api import AgentlaneClient  # noqa: E402

STEPS_PER_RUN = 5


@dataclass
class Level:
    sessions: int
    env: dict[str, str] = field(default_factory=dict)
    seconds: float | None = None  # the measured window, when not `--seconds`

    @classmethod
    def parse(cls, spec: str) -> Level:
        """`N`, `NxSECONDS`, and either with `:VAR=VALUE;VAR=VALUE` (worker settings)."""
        head, _, settings = spec.partition(":")
        count, _, seconds = head.partition("x")
        env = dict(item.split("=", 1) for item in settings.split(";") if item)
        return cls(int(count), env, float(seconds) if seconds else None)

    @property
    def label(self) -> str:
        extra = " ".join(f"{k.removeprefix('AGENTLANE_')}={v}" for k, v in self.env.items())
        return f"{self.sessions}" + (f" ({extra})" if extra else "")


@dataclass
class Measured:
    accepts: list[float] = field(default_factory=list)
    runs: list[float] = field(default_factory=list)
    steps: list[float] = field(default_factory=list)
    step_count: int = 0
    errors: int = 0


async def step_times(client: AgentlaneClient, run_id: str) -> list[float]:
    """Each model call's scheduling to the next one's, the last one's to the run's end."""
    history = await client.client.get_workflow_handle(run_id).fetch_history()
    calls = [
        ts(e)
        for e in events_of_type(history.events, ET.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, "call_model")
    ]
    done = events_of_type(history.events, ET.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)
    if not calls or not done:
        return []
    marks = [*calls, ts(done[-1])]
    return [b - a for a, b in zip(marks, marks[1:], strict=False)]


async def run_level(stack: Stack, level: Level, args: argparse.Namespace, table: Table) -> None:
    dep = stack.deployment(
        TEMPORAL_WORKFLOW_TASK_DURATION_WARN_SECONDS=TASK_WARN_SECONDS, **level.env
    )
    worker = dep.start_worker()
    client = await stack.client(dep)
    keys = [fresh_key("ladder") for _ in range(level.sessions)]
    spaces = {key: workspace(dep, key) for key in keys}
    warm = asyncio.Event()
    warmed: set[str] = set()
    measuring = [False]
    stopping = [False]
    out = Measured()
    counter = [0]

    async def session(key: str) -> None:
        while not stopping[0]:
            sent = time.monotonic()
            try:
                receipt = await client.send_and_start(key, MESSAGE, workspace=str(spaces[key]))
                accepted = time.monotonic()
                assert receipt.run_id
                result = await client.wait_for_run(receipt.run_id)
            except Exception as err:
                print(f"error in {key}: {err!r}", file=sys.stderr)
                out.errors += measuring[0]
                await asyncio.sleep(1)
                continue
            if result.status != ExecutionStatus.SUCCESS or result.tool_calls != 4:
                out.errors += measuring[0]
            warmed.add(key)
            if len(warmed) == len(keys):
                warm.set()
            # Every send counts here, the warm-up's too: at a level the machine cannot carry, no
            # run ends within the window and the first sends (which create the sessions) are
            # the only ones.
            out.accepts.append(accepted - sent)
            if measuring[0]:
                out.runs.append(time.monotonic() - sent)
                out.step_count += result.tool_calls + 1
                counter[0] += 1
                if counter[0] % args.sample == 0:
                    out.steps.extend(await step_times(client, receipt.run_id))

    began = time.monotonic()
    tasks = [asyncio.create_task(session(key)) for key in keys]
    try:
        await asyncio.wait_for(warm.wait(), args.warmup_cap)
    except TimeoutError:
        note(f"  {level.label}: {len(warmed)}/{len(keys)} sessions had a run after the warm-up cap")
    warmup_s = time.monotonic() - began
    slow_before = slow_tasks(worker.log.read_text(errors="replace"))
    cpu = (cpu_seconds(worker.pid), cpu_seconds(stack.server.pid()))
    measuring[0] = True
    window_start = time.monotonic()
    window = level.seconds or args.seconds
    rss_seen: list[str] = []
    while (left := window_start + window - time.monotonic()) > 0:
        # A long window shows whether the worker's memory levels off.
        await asyncio.sleep(min(left, args.rss_every))
        rss_seen.append(f"{(time.monotonic() - began) / 60:.1f} min {rss_mb(worker.pid):.0f} MB")
    measuring[0] = False
    span = time.monotonic() - window_start
    now_cpu = (cpu_seconds(worker.pid), cpu_seconds(stack.server.pid()))
    slow = slow_tasks(worker.log.read_text(errors="replace"))
    worker_rss = rss_mb(worker.pid)
    stopping[0] = True
    # The runs in flight end (bounded); none starts.
    await asyncio.wait(tasks, timeout=120)
    for task in tasks:
        task.cancel()
    steps = max(1, out.step_count)
    worker_cpu, server_cpu = ((b - a) * 1000 / steps for a, b in zip(cpu, now_cpu, strict=True))
    in_window = slow.count - slow_before.count
    table.add(
        level.label,
        len(out.runs),
        f"{out.step_count / span:.1f}",
        f"{pct(out.steps, 0.5) * 1000:.0f}",
        f"{pct(out.steps, 0.99) * 1000:.0f}",
        f"{pct(out.accepts, 0.5) * 1000:.0f}",
        f"{pct(out.accepts, 0.99) * 1000:.0f}",
        f"{pct(out.runs, 0.5):.1f}",
        f"{worker_cpu:.1f}",
        f"{server_cpu:.1f}",
        f"{worker_rss:.0f}",
        f"{in_window} / {slow_before.count}",
        out.errors,
    )
    note(
        f"  {level.label} sessions: warm-up {warmup_s:.0f} s, then {span:.0f} s: "
        f"{len(out.runs)} runs, {out.step_count / span:.1f} steps/s, RSS {worker_rss:.0f} MB; "
        f"tasks over {TASK_WARN_SECONDS} s: {slow.describe()}"
    )
    if len(rss_seen) > 1:
        note(f"  {level.label} sessions, worker RSS: {', '.join(rss_seen)}")
    dep.stop_workers()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--levels", default="1,20,100,300,500")
    parser.add_argument("--seconds", type=float, default=60, help="measured window per level")
    parser.add_argument("--warmup-cap", type=float, default=600)
    parser.add_argument("--sample", type=int, default=5, help="read the history of 1 run in N")
    parser.add_argument("--rss-every", type=float, default=120, help="seconds between RSS notes")
    args = parser.parse_args()
    if os.environ.get("AGENTLANE_BENCH_QUICK") == "1":
        args.levels, args.seconds, args.warmup_cap = "1,3", 10, 30
    levels = [Level.parse(spec) for spec in args.levels.split(",")]
    table = Table(
        f"load ladder: closed loop, 5-step runs, offline model at zero latency, "
        f"{args.levels} ({os.cpu_count()} cores, load average at start "
        f"{os.getloadavg()[0]:.1f})",
        [
            "sessions",
            "runs",
            "steps/s",
            "step p50 ms",
            "step p99 ms",
            "accept p50 ms (all sends)",
            "accept p99 ms",
            "run p50 s",
            "worker CPU ms/step",
            "server CPU ms/step",
            "worker RSS MB",
            f"tasks > {TASK_WARN_SECONDS} s (window / warm-up)",
            "errors",
        ],
    )
    async with bench_stack("ladder") as stack:
        for level in levels:
            await run_level(stack, level, args, table)
    table.print()
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
