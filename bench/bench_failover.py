"""Kill -9 of the worker running a streaming model call, with a second worker already running:
seconds from the kill to the next new visible text at a subscribed client, and to the run's end.

    python bench/bench_failover.py          (from the repository root, with the venv's Python)

Baseline, same run, same setup: a run that is not killed, whose consecutive text deltas arrive at
the client every batch interval or so; the ratio says how much longer a user stares at a stalled
reply when a worker dies.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

from agentlane.events import EventKind  # noqa: E402
from agentlane.ids import events_workflow_id, session_workflow_id  # noqa: E402
from agentlane.run import ExecutionStatus  # noqa: E402
from bench.common import (  # noqa: E402
    ET,
    Figures,
    Table,
    Watcher,
    bench_stack,
    fresh_key,
    median,
    note,
    p95,
    ts,
    wait_idle,
    workflow_chain,
    workspace,
)
from clients.api import AgentlaneClient  # noqa: E402
from tests.harness import Deployment  # noqa: E402

QUICK = os.environ.get("AGENTLANE_BENCH_QUICK") == "1"
COUNT = 60 if QUICK else 300
INSTRUCTION = f"count slowly to {COUNT}"  # the offline model streams it at 50 ms per number
REPEATS = 3


@dataclass
class Outcome:
    run_id: str
    killed_pid: int | None
    first_text_s: float  # send -> first visible text
    kill_to_resume_s: float | None  # kill -> first new text from the retried attempt
    kill_to_any_text_s: float | None  # kill -> first new text of any attempt (in-flight batches)
    to_done_s: float  # first visible text (the kill, when killed) -> run result
    gaps: list[float]  # between consecutive arrivals of new text
    attempts: int
    retry_started_s: float | None  # kill -> retried model attempt started (server's history)
    sticky_timeouts: str  # workflows whose next task waited for the dead worker's sticky queue
    exact: bool  # what the user saw is exactly the final reply, no duplicates
    visible_chars: int


async def running_worker_pid(client: AgentlaneClient, run_id: str) -> int:
    """pid of the worker running the run's model activity (`pid@host` identity)."""
    handle = client.client.get_workflow_handle(run_id)
    for _ in range(100):
        pending = (await handle.describe()).raw_description.pending_activities
        identity = pending[0].last_worker_identity if pending else ""
        if identity:
            return int(identity.split("@", 1)[0])
        await asyncio.sleep(0.02)
    raise RuntimeError(f"no worker identity on {run_id}'s pending activity")


async def one_run(client: AgentlaneClient, dep: Deployment, key: str, kill: bool) -> Outcome:
    offset = await client.events_offset(key)
    watcher = Watcher(client, key, offset).start()
    sent = time.monotonic()
    receipt = await client.send_and_start(key, INSTRUCTION)
    assert receipt.run_id
    await asyncio.wait_for(watcher.new_text.wait(), 60)
    first = time.monotonic()
    killed: int | None = None
    kill_at = first
    kill_wall = time.time()
    if kill:
        killed = await running_worker_pid(client, receipt.run_id)
        victim = next(w for w in dep.workers if w.pid == killed)
        kill_at = time.monotonic()
        kill_wall = time.time()
        victim.kill9()
        dep.workers.remove(victim)
    result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 180)
    done = time.monotonic()
    await watcher.wait()
    arrivals = [s for s in watcher.text_arrivals() if s.event.run_id == receipt.run_id]
    resumed = next((s.at for s in arrivals if s.at > kill_at and s.event.attempt > 1), None)
    any_new = next((s.at for s in arrivals if s.at > kill_at), None)
    visible = watcher.visible(receipt.run_id)
    if result.status != ExecutionStatus.SUCCESS:
        raise RuntimeError(f"{receipt.run_id} ended {result.status}: {result.error}")
    attempts = max(
        (s.event.attempt for s in watcher.seen if s.event.kind == EventKind.MESSAGE_START),
        default=1,
    )
    retry_started: float | None = None
    sticky: list[str] = []
    if kill:
        run = await workflow_chain(client.client, receipt.run_id)
        starts = [
            ts(e)
            for e in run.events
            if e.event_type == ET.EVENT_TYPE_ACTIVITY_TASK_STARTED
            and e.activity_task_started_event_attributes.attempt > 1
        ]
        retry_started = starts[0] - kill_wall if starts else None
        for label, wid in (
            ("run", receipt.run_id),
            ("stream", events_workflow_id(key)),
            ("session", session_workflow_id(key)),
        ):
            chain = await workflow_chain(client.client, wid)
            if any(
                e.event_type == ET.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT and ts(e) > kill_wall
                for e in chain.events
            ):
                sticky.append(label)
    return Outcome(
        run_id=receipt.run_id,
        killed_pid=killed,
        first_text_s=first - sent,
        kill_to_resume_s=resumed - kill_at if kill and resumed else None,
        kill_to_any_text_s=any_new - kill_at if kill and any_new else None,
        to_done_s=done - kill_at,
        gaps=[b.at - a.at for a, b in zip(arrivals, arrivals[1:], strict=False)],
        attempts=attempts,
        retry_started_s=retry_started,
        sticky_timeouts=",".join(sticky) or "none",
        exact=visible == result.reply,
        visible_chars=len(visible),
    )


async def main() -> None:
    figures = Figures()
    async with bench_stack("bench-failover") as stack:
        dep = stack.deployment()
        dep.start_worker()
        dep.start_worker()
        client = await stack.client(dep)
        key = fresh_key("failover")
        ws = workspace(dep, key)
        note(
            f"dev server {stack.server.address}; two worker processes on one task queue; "
            f"`{INSTRUCTION}` (offline model, 50 ms per number)"
        )
        first = await client.send_and_start(key, "say ready", workspace=str(ws))
        assert first.run_id
        await client.wait_for_run(first.run_id)
        runs = 1
        await wait_idle(client, key, runs)

        baseline = await one_run(client, dep, key, kill=False)
        runs += 1
        await wait_idle(client, key, runs)

        killed: list[Outcome] = []
        for _ in range(REPEATS):
            outcome = await one_run(client, dep, key, kill=True)
            killed.append(outcome)
            runs += 1
            await wait_idle(client, key, runs)
            dep.start_worker()  # back to two workers before the next kill

        table = Table(
            "Kill -9 of the model activity's worker (seconds; kill right after the first "
            "visible text)",
            [
                "run",
                "killed pid",
                "kill->retry started",
                "kill->resumed text",
                "kill->any new text",
                "kill->run end",
                "model attempts",
                "sticky timeouts",
                "visible == reply",
                "chars",
            ],
        )
        table.add(
            "no kill (baseline)",
            "-",
            "-",
            "-",
            "-",
            baseline.to_done_s,
            baseline.attempts,
            "-",
            baseline.exact,
            baseline.visible_chars,
        )
        nan = float("nan")
        for i, o in enumerate(killed, 1):
            table.add(
                f"kill {i}",
                o.killed_pid,
                o.retry_started_s or nan,
                o.kill_to_resume_s or nan,
                o.kill_to_any_text_s or nan,
                o.to_done_s,
                o.attempts,
                o.sticky_timeouts,
                o.exact,
                o.visible_chars,
            )
        table.print()

        resumes = [o.kill_to_resume_s for o in killed if o.kill_to_resume_s is not None]
        dones = [o.to_done_s for o in killed]
        gap_med, gap_p95 = median(baseline.gaps), p95(baseline.gaps)
        res_med = median(resumes)
        note(
            "method: a client subscribed before sending folds events with MessageView; "
            "'resumed text' is the first newly visible text carried by the retried attempt "
            "(attempt > 1) after the kill; 'any new text' also counts batches the dead worker "
            "had in flight. Run end is measured from the kill (from the first text for the "
            "baseline, where the kill would have been). 'retry started' is the retried model "
            "attempt's ACTIVITY_TASK_STARTED time in the run's history; 'sticky timeouts' names "
            "the workflows whose next workflow task timed out on the dead worker's sticky queue "
            "(WORKFLOW_TASK_TIMED_OUT after the kill).\n"
            f"baseline: gap between consecutive new text at the client: median "
            f"{gap_med * 1000:.0f} ms, p95 {gap_p95 * 1000:.0f} ms, max "
            f"{max(baseline.gaps) * 1000:.0f} ms ({len(baseline.gaps)} gaps); "
            f"first text {baseline.first_text_s:.2f} s after send\n"
            f"kill->resumed text median {res_med:.2f} s = {res_med / gap_med:.0f}x the normal "
            f"gap between deltas; kill->run end median {median(dones):.2f} s vs "
            f"{baseline.to_done_s:.2f} s without a kill "
            f"(+{median(dones) - baseline.to_done_s:.2f} s)\n"
            f"no duplicates: visible text equals the final reply in "
            f"{sum(o.exact for o in [baseline, *killed])}/{1 + len(killed)} runs"
        )
        for i, o in enumerate(killed, 1):
            figures.add(f"failover_kill_to_resume_{i}", o.kill_to_resume_s or float("nan"), "s")
        figures.add("failover_kill_to_resume_median", res_med, "s")
        figures.add("failover_kill_to_run_end_median", median(dones), "s")
        figures.add("failover_baseline_delta_gap_median", gap_med * 1000, "ms")
        figures.add("failover_baseline_run_end", baseline.to_done_s, "s")
        figures.add("ratio_resume_vs_delta_gap", res_med / gap_med, "x")
        figures.add("failover_exact_text_runs", f"{sum(o.exact for o in killed)}/{len(killed)}")
    figures.print()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(130)
