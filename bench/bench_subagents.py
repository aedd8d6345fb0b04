"""Sub-agents (SPEC §13.4): a parent fanning out to 6 sub-agents of 10 steps each, against the
same 60 steps run serially in one session; history events per child; the parent's spawn step.

    python bench/bench_subagents.py            (from the repository root, with the venv's Python)
    python bench/bench_subagents.py --quick    (one round: a smoke run)

One dev server, one worker process, the offline model with a 200 ms first-token delay (a model's
latency; at zero latency two cores are the limit and parallel children only share them). A step
is one model call and one `write` (a local activity).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

from temporalio.api.enums.v1 import EventType  # noqa: E402

from agentlane.run import ExecutionResult, ExecutionStatus  # noqa: E402
from bench.common import (  # noqa: E402
    Figures,
    Table,
    bench_stack,
    fresh_key,
    median,
    note,
    workflow_chain,
    workspace,
)

QUICK = os.environ.get("AGENTLANE_BENCH_QUICK") == "1"
CHILDREN = 6
STEPS = 10
LATENCY_MS = "200"
CHILD_TASK = " then ".join(f"write f{i}.txt with {i}" for i in range(STEPS)) + " then say done"
FAN_OUT = f"spawn {CHILDREN} sub-agents to `{CHILD_TASK}` then say all done"
SERIAL = (
    " then ".join(f"write f{i}.txt with {i}" for i in range(CHILDREN * STEPS)) + " then say done"
)


async def main() -> None:
    rounds = 1 if QUICK else 3
    figures = Figures()
    async with bench_stack("bench-subagents") as stack:
        dep = stack.deployment(AGENTLANE_OFFLINE_FIRST_TOKEN_MS=LATENCY_MS)
        (dep.data_dir / "config.toml").write_text(
            f"[subagents]\nmax_children_per_agent = {CHILDREN}\n"
        )
        dep.start_worker()
        client = await stack.client(dep)
        fan: list[float] = []
        serial: list[float] = []
        per_child: list[int] = []
        parent_events: list[int] = []
        spawn_step: list[float] = []
        child_wall: list[float] = []
        for r in range(rounds):
            key = fresh_key("fan")
            started = time.monotonic()
            receipt = await client.send_and_start(key, FAN_OUT, workspace=str(workspace(dep, key)))
            result = await client.wait_for_run(receipt.run_id or "")
            fan.append(time.monotonic() - started)
            assert result.status == ExecutionStatus.SUCCESS, result.error
            parent = await workflow_chain(client.client, receipt.run_id or "")
            parent_events.append(parent.event_count)
            children = [
                e.child_workflow_execution_started_event_attributes.workflow_execution.workflow_id
                for e in parent.events
                if e.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED
            ]
            children = [c for c in children if ":run:" in c]  # not their event streams
            assert len(children) == CHILDREN, children
            initiated = [
                e.event_time.ToDatetime()
                for e in parent.events
                if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
            ]
            ended = [
                e.event_time.ToDatetime()
                for e in parent.events
                if e.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED
            ]
            spawn_step.append((max(ended) - min(initiated)).total_seconds())
            for child in children:
                chain = await workflow_chain(client.client, child)
                per_child.append(chain.event_count)
                done: ExecutionResult = await client.client.get_workflow_handle(
                    child, result_type=ExecutionResult
                ).result()
                assert done.tool_calls == STEPS, (child, done.tool_calls)
                child_wall.append(done.duration_ms / 1000)

            key = fresh_key("serial")
            started = time.monotonic()
            receipt = await client.send_and_start(key, SERIAL, workspace=str(workspace(dep, key)))
            result = await client.wait_for_run(receipt.run_id or "")
            serial.append(time.monotonic() - started)
            assert result.tool_calls == CHILDREN * STEPS, result.tool_calls
            note(f"round {r + 1}: fan-out {fan[-1]:.2f} s, serial {serial[-1]:.2f} s")

        table = Table(
            f"{CHILDREN} sub-agents x {STEPS} steps vs {CHILDREN * STEPS} steps in one session "
            f"(offline model, {LATENCY_MS} ms first token; median of {rounds})",
            ["case", "wall s", "history events"],
        )
        table.add("fan-out (parent run)", median(fan), median(parent_events))
        table.add("  one child", median(child_wall), median(per_child))
        table.add("  parent's spawn step", median(spawn_step), "")
        table.add("serial (one run)", median(serial), "")
        table.print()
        figures.add("subagents_fanout_wall", median(fan), "s")
        figures.add("subagents_serial_wall", median(serial), "s")
        figures.add("subagents_speedup", median(serial) / median(fan), "x")
        figures.add("subagents_child_history_events", median(per_child), "events")
        figures.add("subagents_parent_history_events", median(parent_events), "events")
        figures.add("subagents_parent_spawn_step", median(spawn_step), "s")
        figures.print()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one round (numbers mean little)")
    if parser.parse_args().quick:
        QUICK = True
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(130)
