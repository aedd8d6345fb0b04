"""Engine overhead per step, history per step and stream history, against baselines measured in
the same run.

    python bench/bench_engine.py            (from the repository root, with the venv's Python)
    python bench/bench_engine.py --cpu [--baseline main] [--traced] [--rounds 5] [--steps 40]
        only the CPU per step of the worker and the dev server, engine against the same-shape
        no-op (and the engine at an older commit; with --traced each also traced, spans exported
        over OTLP), interleaved, with the spread

A "step" is one model call that asks for one tool call, plus that tool call: the offline model at
zero latency, instruction `write f0.txt with x then write f1.txt with x then ...` (the offline
planner turns each clause into exactly one tool call per model call; the run is checked to have
made N tool calls in N+1 model calls).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

from temporalio import activity, workflow  # noqa: E402
from temporalio.api.history.v1 import HistoryEvent  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.contrib.workflow_streams import WorkflowStreamClient  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from activities.providers.base import (  # noqa: E402
    Finish,
    ModelRequest,
    TextDelta,
    ToolCallComplete,
)
from activities.providers.offline import OfflineProvider  # noqa: E402
from activities.stream_publishers import SessionPublishers  # noqa: E402
from activities.system_prompt import build_system_prompt  # noqa: E402
from activities.tools.file_tools import write_file  # noqa: E402
from activities.tools.specs import WriteArgs, tool_specs  # noqa: E402
from activities.transcript_store import TranscriptStore  # noqa: E402
from agentlane.events import AgentEvent, EventKind  # noqa: E402
from agentlane.ids import (
    events_workflow_id,  # noqa: E402
    session_workflow_id,  # noqa: E402
)
from agentlane.model_calls import CALL_MODEL  # noqa: E402
from agentlane.run import ExecutionResult, ExecutionStatus  # noqa: E402
from agentlane.settings import Settings  # noqa: E402
from agentlane.transcript import Role, ToolCall, TranscriptEntry  # noqa: E402
from bench.common import (  # noqa: E402
    ET,
    Chain,
    Figures,
    Stack,
    Table,
    Watcher,
    bench_stack,
    checkout,
    cpu_seconds,
    fresh_key,
    median,
    note,
    rss_mb,
    stats_ms,
    ts,
    wait_idle,
    workflow_chain,
    workspace,
)
from clients.api import AgentlaneClient  # noqa: E402
from store.open import open_store  # noqa: E402
from tests.fakes.otlp_receiver import OtlpReceiver  # noqa: E402
from tests.harness import Deployment  # noqa: E402

QUICK = os.environ.get("AGENTLANE_BENCH_QUICK") == "1"  # a smoke run of the script itself
TIMING_STEPS = 10 if QUICK else 50
TIMING_RUNS = 3
# The telemetry cases differ by a few percent: more runs, interleaved.
TELEMETRY_RUNS = 2 if QUICK else 10
HISTORY_LENGTHS = (5, 10, 20) if QUICK else (10, 100, 1000)
STREAM_BATCHES_MS = (100, 200, 500)
STREAM_COUNT = 40 if QUICK else 400
STREAM_TOKEN_MS = 25


def instruction(steps: int) -> str:
    return " then ".join(f"write f{i}.txt with x" for i in range(steps))


# -- per-step timing from a workflow history ------------------------------------------------


@dataclass
class Activity:
    name: str
    scheduled: float
    started: float
    completed: float


def activities_of(events: list[HistoryEvent]) -> list[Activity]:
    """Activities in schedule order, with the times of their scheduled/started/completed events
    (the started event carries the time the worker picked the task up)."""
    by_id: dict[int, Activity] = {}
    for e in events:
        if e.event_type == ET.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            name = e.activity_task_scheduled_event_attributes.activity_type.name
            by_id[e.event_id] = Activity(name, ts(e), 0.0, 0.0)
        elif e.event_type == ET.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            by_id[e.activity_task_started_event_attributes.scheduled_event_id].started = ts(e)
        elif e.event_type == ET.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            by_id[e.activity_task_completed_event_attributes.scheduled_event_id].completed = ts(e)
    return [by_id[k] for k in sorted(by_id)]


@dataclass
class WorkflowTask:
    scheduled: float
    started: float
    completed: float


def workflow_tasks_of(events: list[HistoryEvent]) -> list[WorkflowTask]:
    by_id: dict[int, WorkflowTask] = {}
    for e in events:
        if e.event_type == ET.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
            by_id[e.event_id] = WorkflowTask(ts(e), 0.0, 0.0)
        elif e.event_type == ET.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            by_id[e.workflow_task_started_event_attributes.scheduled_event_id].started = ts(e)
        elif e.event_type == ET.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            by_id[e.workflow_task_completed_event_attributes.scheduled_event_id].completed = ts(e)
    return [by_id[k] for k in sorted(by_id) if by_id[k].completed]


@dataclass
class StepTimes:
    total: list[float] = field(default_factory=list)
    parts: dict[str, list[float]] = field(default_factory=dict)
    workflow_tasks: list[int] = field(default_factory=list)  # per step

    def add(self, part: str, value: float) -> None:
        self.parts.setdefault(part, []).append(value)

    def merge(self, other: StepTimes) -> None:
        self.total += other.total
        self.workflow_tasks += other.workflow_tasks
        for k, v in other.parts.items():
            self.parts.setdefault(k, []).extend(v)


def _split_workflow_tasks(
    out: StepTimes, wfts: list[WorkflowTask], after: float, before: float
) -> None:
    """The workflow tasks between an activity's completion and the next schedule: time waiting
    for a worker to pick the task up (dispatch) and time the worker held it (run)."""
    inside = [w for w in wfts if w.scheduled >= after - 1e-4 and w.completed <= before + 1e-4]
    out.add("workflow task dispatch", sum(w.started - w.scheduled for w in inside))
    out.add("workflow task run on worker", sum(w.completed - w.started for w in inside))


@dataclass
class LocalActivity:
    name: str
    scheduled: float
    completed: float
    recorded: float  # the marker event: the workflow task that ran it completed


def local_activities_of(events: list[HistoryEvent]) -> list[LocalActivity]:
    """Local activities from their markers (the SDK writes the type and its schedule and
    completion times as JSON in the marker's `data` detail)."""
    out: list[LocalActivity] = []
    for e in events:
        if e.event_type != ET.EVENT_TYPE_MARKER_RECORDED:
            continue
        attrs = e.marker_recorded_event_attributes
        if attrs.marker_name != "core_local_activity" or "data" not in attrs.details:
            continue
        data = json.loads(attrs.details["data"].payloads[0].data)

        def seconds(t: dict[str, int]) -> float:
            return t.get("seconds", 0) + t.get("nanos", 0) / 1e9

        out.append(
            LocalActivity(
                data["activity_type"],
                seconds(data["original_schedule_time"]),
                seconds(data["complete_time"]),
                ts(e),
            )
        )
    return out


def engine_steps(chain: Chain) -> StepTimes:
    """One step = from one `call_model` ACTIVITY_TASK_SCHEDULED to the next, within one run of
    the chain, with exactly one tool call in between. It holds: the model activity's dispatch
    (scheduled -> started) and run (started -> completed), then the workflow task that the
    model's completion triggers, which runs the tool (read/write/edit are local activities,
    executed inside that task) and schedules the next model call. A tool that is a regular
    activity (exec) adds its own dispatch and run and a second workflow task."""
    out = StepTimes()
    wft_counts: list[int] = []
    for run in chain.runs:
        events = list(run.events)
        acts, wfts = activities_of(events), workflow_tasks_of(events)
        local = local_activities_of(events)
        models = [a for a in acts if a.name == CALL_MODEL]
        for model, nxt in zip(models, models[1:], strict=False):
            tools = [
                a
                for a in acts
                if a.name.startswith("tool_") and model.completed <= a.scheduled <= nxt.scheduled
            ]
            local_tools = [
                t
                for t in local
                if t.name.startswith("tool_")
                and model.completed - 1e-4 <= t.recorded <= nxt.scheduled + 1e-4
            ]
            if len(tools) + len(local_tools) != 1:
                continue
            out.total.append(nxt.scheduled - model.scheduled)
            out.add("model activity dispatch", model.started - model.scheduled)
            out.add("model activity run", model.completed - model.started)
            for tool in tools:
                out.add("tool activity dispatch", tool.started - tool.scheduled)
                out.add("tool activity run", tool.completed - tool.started)
            inside = [
                w
                for w in wfts
                if w.scheduled >= model.completed - 1e-4 and w.completed <= nxt.scheduled + 1e-4
            ]
            out.add("workflow task dispatch", sum(w.started - w.scheduled for w in inside))
            # A local tool call runs inside this time (its marker's timestamps come from two
            # clocks, so it is not split out).
            out.add("workflow task run on worker", sum(w.completed - w.started for w in inside))
            wft_counts.append(len(inside))
    out.workflow_tasks = wft_counts
    return out


def noop_steps(chain: Chain) -> StepTimes:
    """The same method for the no-op loop: scheduled -> next scheduled."""
    out = StepTimes()
    for run in chain.runs:
        events = list(run.events)
        acts, wfts = activities_of(events), workflow_tasks_of(events)
        for a, b in zip(acts, acts[1:], strict=False):
            out.total.append(b.scheduled - a.scheduled)
            out.add("activity dispatch", a.started - a.scheduled)
            out.add("activity run", a.completed - a.started)
            _split_workflow_tasks(out, wfts, a.completed, b.scheduled)
    return out


# -- the engine -----------------------------------------------------------------------------


async def run_steps(
    client: AgentlaneClient, dep: Deployment, steps: int, limit_s: float = 600
) -> tuple[str, str, ExecutionResult]:
    """One fresh session, one run of `steps` tool steps; returns (session key, run id, result)."""
    key = fresh_key(f"eng{steps}")
    ws = workspace(dep, key)
    receipt = await client.send_and_start(key, instruction(steps), workspace=str(ws))
    assert receipt.run_id
    result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), limit_s)
    if result.status != ExecutionStatus.SUCCESS or result.tool_calls != steps:
        raise RuntimeError(
            f"run {receipt.run_id}: {result.status} {result.termination_reason} "
            f"tool_calls={result.tool_calls} turns={result.turns} error={result.error}"
        )
    # One tool call per model call, and the final call answers without tools.
    assert result.turns == steps + 1, result.turns
    await wait_idle(client, key, runs=1)
    return key, receipt.run_id, result


# -- baseline 1: the same steps in a plain asyncio loop -------------------------------------


async def asyncio_loop(root: Path, steps: int) -> list[float]:
    """Per step: read the transcript, stream the same offline model, append the assistant
    entry, run the same write tool, append its result; store calls in threads like the
    activities do (the embedded store). No Temporal, no event stream."""
    store = TranscriptStore(await open_store(Settings(data_dir=root)))
    key = fresh_key("loop")
    ws = root / "ws" / key
    ws.mkdir(parents=True)
    provider = OfflineProvider(first_token_delay=0.0, token_delay=0.0)
    tools = tool_specs(["read", "write", "edit", "exec"])
    system = build_system_prompt(str(ws), tools)
    user = TranscriptEntry(id="u", role=Role.USER, ts=time.time(), text=instruction(steps))
    await store.append(key, [user])
    times: list[float] = []
    for turn in range(steps):
        started = time.perf_counter()
        entries = await store.read_context(key)
        request = ModelRequest(model="planner", system=system, entries=entries, tools=tools)
        text, calls = "", []
        async for event in provider.stream(request, None):
            if isinstance(event, TextDelta):
                text += event.text
            elif isinstance(event, ToolCallComplete):
                calls.append(event)
            elif isinstance(event, Finish):
                pass
        assert len(calls) == 1 and calls[0].name == "write", calls
        call = calls[0]
        args = WriteArgs.model_validate_json(call.arguments_json)
        assistant = TranscriptEntry(
            id=f"a{turn}",
            role=Role.ASSISTANT,
            ts=time.time(),
            text=text,
            tool_calls=[ToolCall(id=call.id, name=call.name, arguments=args.model_dump())],
        )
        await store.append(key, [assistant])
        result = await asyncio.to_thread(write_file, str(ws), args)
        tool_entry = TranscriptEntry(
            id=f"{call.id}:result",
            role=Role.TOOL,
            ts=time.time(),
            tool_call_id=call.id,
            tool_name=call.name,
            text=result.text,
            is_error=result.is_error,
        )
        await store.append(key, [tool_entry])
        times.append(time.perf_counter() - started)
    return times


# -- baseline 2: a bare no-op activity loop on the same dev server --------------------------


@activity.defn(name="bench_noop")
async def noop_activity() -> None:
    return None


# Not sandboxed: this module is __main__ when run as a script, which the sandbox cannot
# re-import; the loop is deterministic anyway.
@workflow.defn(name="BenchNoopLoop", sandboxed=False)
class NoopLoop:
    @workflow.run
    async def run(self, n: int, with_local: bool) -> None:
        # The activity has its own task queue, like the engine's model activity: on the
        # workflow's own queue the SDK would run it eagerly (no dispatch through the server),
        # which the model call never gets. `with_local` adds a no-op local activity after each,
        # the shape of an engine step (model call, then a file tool as a local activity).
        queue = f"{workflow.info().task_queue}-act"
        for _ in range(n):
            await workflow.execute_activity(
                noop_activity, task_queue=queue, start_to_close_timeout=timedelta(seconds=30)
            )
            if with_local:
                await workflow.execute_local_activity(
                    noop_activity, start_to_close_timeout=timedelta(seconds=30)
                )


async def noop_loops(
    client: Client, task_queue: str, steps: int, runs: int, with_local: bool = False
) -> StepTimes:
    total = StepTimes()
    async with (
        Worker(client, task_queue=task_queue, workflows=[NoopLoop], activities=[noop_activity]),
        Worker(client, task_queue=f"{task_queue}-act", activities=[noop_activity]),
    ):
        for i in range(runs + 1):
            wid = fresh_key("noop")
            await client.execute_workflow(
                NoopLoop.run, args=[steps, with_local], id=wid, task_queue=task_queue
            )
            if i == 0:
                continue  # warm-up
            total.merge(noop_steps(await workflow_chain(client, wid)))
    return total


# -- where an activity's time goes ----------------------------------------------------------


async def publish_costs(client: AgentlaneClient, key: str, n: int) -> dict[str, list[float]]:
    """Stream round trips, timed from this process against a live session's events workflow:
    an offset query (what a retried model attempt's read-back costs per page) and one publish
    flushed through a lease on a publisher pool (one signal), which is what a failed attempt, a
    model call that showed text and run end wait for before they return; the others leave their
    events to the next batch."""
    out: dict[str, list[float]] = {"offset query": [], "publish + flush (signal)": []}
    publishers = SessionPublishers(timedelta(milliseconds=200))
    try:
        for i in range(n):
            started = time.perf_counter()
            await WorkflowStreamClient.create(client.client, events_workflow_id(key)).get_offset()
            out["offset query"].append(time.perf_counter() - started)
            event = AgentEvent(
                kind=EventKind.TOOL_EXECUTION_START,
                event_id=f"bench/{i}",
                session_key=key,
                run_id="bench",
            )
            started = time.perf_counter()
            async with publishers.lease(client.client, key) as publisher:
                publisher.publish(event)
                await publisher.flush()
            out["publish + flush (signal)"].append(time.perf_counter() - started)
    finally:
        await publishers.close()
    return out


# -- stream history -------------------------------------------------------------------------


def new_events(before: Chain, after: Chain) -> list[HistoryEvent]:
    """Events of `after` that `before` did not have (histories only grow; closed runs are
    complete, so only the last run of `before` can have gained events)."""
    k = len(before.runs)
    out = list(after.runs[k - 1].events[len(before.runs[k - 1].events) :])
    for run in after.runs[k:]:
        out += list(run.events)
    return out


@dataclass
class StreamResult:
    batch_ms: int
    stream_seconds: float
    client_seconds: float
    added_events: int
    signals: int
    updates: int
    items: int
    text_items: int
    run_events: int
    run_bytes: int
    small_run_events: int
    small_run_bytes: int
    reply_chars: int
    reply_ok: bool


async def stream_case(stack: Stack, batch_ms: int) -> StreamResult:
    dep = stack.deployment(
        AGENTLANE_STREAM_BATCH_MS=str(batch_ms), AGENTLANE_OFFLINE_TOKEN_MS=str(STREAM_TOKEN_MS)
    )
    worker = dep.start_worker()
    try:
        client = await stack.client(dep)
        key = fresh_key(f"stream{batch_ms}")
        ws = workspace(dep, key)
        # A short first run creates the session and its events workflow, and gives the size of
        # a run that barely streams, to compare with.
        first = await client.send_and_start(key, "say ready", workspace=str(ws))
        assert first.run_id
        await client.wait_for_run(first.run_id)
        await wait_idle(client, key, runs=1)
        small = await workflow_chain(client.client, first.run_id)

        events_id = events_workflow_id(key)
        before = await workflow_chain(client.client, events_id)
        offset = await client.events_offset(key)
        watcher = Watcher(client, key, offset).start()
        receipt = await client.send_and_start(key, f"count to {STREAM_COUNT}")
        assert receipt.run_id
        result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 120)
        await watcher.wait()
        await wait_idle(client, key, runs=2)
        after = await workflow_chain(client.client, events_id)
        run = await workflow_chain(client.client, receipt.run_id)

        model = [a for a in activities_of(run.events) if a.name == CALL_MODEL]
        stream_seconds = sum(a.completed - a.started for a in model)
        arrivals = watcher.text_arrivals()
        added = new_events(before, after)
        return StreamResult(
            batch_ms=batch_ms,
            stream_seconds=stream_seconds,
            client_seconds=arrivals[-1].at - arrivals[0].at if arrivals else 0.0,
            added_events=len(added),
            signals=sum(e.event_type == ET.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED for e in added),
            updates=sum(
                e.event_type == ET.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED for e in added
            ),
            items=len(watcher.seen),
            text_items=sum(1 for s in watcher.seen if s.event.kind.value == "text_delta"),
            run_events=run.event_count,
            run_bytes=run.size,
            small_run_events=small.event_count,
            small_run_bytes=small.size,
            reply_chars=len(result.reply),
            reply_ok=watcher.visible(receipt.run_id) == result.reply,
        )
    finally:
        worker.stop()  # free the CPU for the next case


# -- main -----------------------------------------------------------------------------------


async def codec_case(
    stack: Stack,
    figures: Figures,
    off_med: float,
    off_p95: float,
    sizes: dict[int, tuple[int, int]],
) -> None:
    """The same steps with payload encryption on (AES-256-GCM over every payload), beside the
    codec-off figures of this run."""
    key_b64 = base64.b64encode(os.urandom(32)).decode()
    enc = stack.deployment(AGENTLANE_ENCRYPTION_KEYS=f"k1:{key_b64}")
    enc.start_worker()
    client = await stack.client(enc)
    await run_steps(client, enc, 5)  # warm-up
    times = StepTimes()
    for _ in range(TIMING_RUNS):
        _, run_id, _ = await run_steps(client, enc, TIMING_STEPS)
        times.merge(engine_steps(await workflow_chain(client.client, run_id)))
    steps = HISTORY_LENGTHS[1]
    _, run_id, _ = await run_steps(client, enc, steps, limit_s=900)
    chain = await workflow_chain(client.client, run_id)
    on_med, on_p95 = stats_ms(times.total)
    table = Table(
        "Payload encryption off and on (same run; step ms, run history bytes per step)",
        ["codec", "step median", "step p95", f"bytes/step at {steps}"],
    )
    table.add("off", off_med, off_p95, sizes[steps][1] / steps)
    table.add("on (AES-256-GCM)", on_med, on_p95, chain.size / steps)
    table.print()
    figures.add("engine_step_median_codec_on", on_med, "ms")
    figures.add("ratio_step_codec_on_vs_off", on_med / off_med, "x")
    figures.add(f"history_bytes_per_step_{steps}_codec_on", chain.size / steps, "B")
    enc.stop_workers()


async def telemetry_case(stack: Stack, figures: Figures) -> None:
    """The same steps with telemetry off, tracing on (OTLP to a receiver in this process) and
    tracing + metrics on (Prometheus endpoint scraped once per run), each on its own worker,
    interleaved run by run so drift on the machine hits all three alike."""
    from tests.harness import devserver

    receiver = OtlpReceiver().start()
    port = devserver.free_port()
    # As deployed: the worker's default export delay (1 s), not the tests' 200 ms.
    otel = {
        k: v for k, v in receiver.env("http/protobuf").items() if k != "OTEL_BSP_SCHEDULE_DELAY"
    }
    cases = {
        "off": stack.deployment(),
        "tracing": stack.deployment(**otel),
        "tracing + metrics": stack.deployment(
            **otel, AGENTLANE_METRICS_ADDRESS=f"127.0.0.1:{port}"
        ),
    }
    clients: dict[str, AgentlaneClient] = {}
    for name, dep in cases.items():
        dep.start_worker()
        clients[name] = await stack.client(dep)
        await run_steps(clients[name], dep, 5)  # warm-up
    times = {name: StepTimes() for name in cases}
    history: dict[str, list[tuple[int, int]]] = {name: [] for name in cases}
    run_medians: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for i in range(TELEMETRY_RUNS):
        # The order rotates, so no case always runs right after another.
        for name in names[i % len(names) :] + names[: i % len(names)]:
            dep = cases[name]
            _, run_id, _ = await run_steps(clients[name], dep, TIMING_STEPS)
            chain = await workflow_chain(clients[name].client, run_id)
            steps = engine_steps(chain)
            times[name].merge(steps)
            run_medians[name].append(median(steps.total))
            history[name].append((chain.event_count, chain.size))
    spans = len(receiver.snapshot())
    receiver.stop()
    off_med, _ = stats_ms(times["off"].total)
    table = Table(
        f"Telemetry off and on (same run, interleaved; {TELEMETRY_RUNS} runs x {TIMING_STEPS} "
        "steps)",
        [
            "telemetry",
            "step median ms",
            "step p95 ms",
            "vs off",
            "vs off, run by run",
            "events/step",
            "bytes/step",
        ],
    )
    for name in cases:
        med, p = stats_ms(times[name].total)
        events = sum(e for e, _ in history[name]) / (TIMING_STEPS * TELEMETRY_RUNS)
        size = sum(b for _, b in history[name]) / (TIMING_STEPS * TELEMETRY_RUNS)
        # Each run against the untraced run of the same round: drift between rounds cancels.
        paired = [t / o for t, o in zip(run_medians[name], run_medians["off"], strict=True)]
        table.add(
            name,
            med,
            p,
            f"{med / off_med:.2f}x",
            f"{median(paired):.2f}x ({min(paired):.2f}-{max(paired):.2f})",
            events,
            size,
        )
        slug = name.replace(" + ", "_").replace(" ", "_")
        figures.add(f"ratio_step_telemetry_{slug}_paired", median(paired), "x")
        figures.add(f"engine_step_median_telemetry_{slug}", med, "ms")
        figures.add(f"ratio_step_telemetry_{slug}_vs_off", med / off_med, "x")
        figures.add(f"history_events_per_step_telemetry_{slug}", events, "events")
        figures.add(f"history_bytes_per_step_telemetry_{slug}", size, "B")
    table.print()
    note(
        f"{spans} spans reached the receiver. Spans leave through a batch processor (1 s delay); "
        "metrics are read by Prometheus from the worker, so neither waits on the step. History "
        "events per step are the same with telemetry on: spans and metrics issue no commands."
    )
    for dep in cases.values():
        dep.stop_workers()


# -- the workflow sandbox: what a new workflow costs the worker --------------------------------

SANDBOX_RUNS = 5 if QUICK else 40


async def sandbox_case(stack: Stack, figures: Figures) -> None:
    """New sessions, one 1-step run each (3 new workflows: session, events stream, run), on a
    worker under each workflow runner (workers/sandbox.py): the SDK's strict sandbox, which
    re-imports every workflow module per instance; the sandbox with the project's modules passed
    through; no sandbox (the default). The worker's CPU per message and the wall time,
    sequential."""
    table = Table(
        f"New workflows: the sandbox's cost ({SANDBOX_RUNS} new sessions, one 1-step run each)",
        ["AGENTLANE_SANDBOX", "worker CPU ms/message", "wall ms/message"],
    )
    measured: dict[str, float] = {}
    for mode in ("strict", "passthrough", "off"):
        dep = stack.deployment(AGENTLANE_SANDBOX=mode)
        worker = dep.start_worker()
        client = await stack.client(dep)
        for _ in range(3):  # warm-up: first imports, caches, connections
            await run_steps(client, dep, 1)
        cpu = cpu_seconds(worker.pid)
        started = time.monotonic()
        for _ in range(SANDBOX_RUNS):
            await run_steps(client, dep, 1)
        wall = (time.monotonic() - started) / SANDBOX_RUNS * 1000
        per = (cpu_seconds(worker.pid) - cpu) / SANDBOX_RUNS * 1000
        measured[mode] = per
        table.add(mode, per, wall)
        dep.stop_workers()
    table.print()
    note(
        "the worker's CPU per new session + run against the strict sandbox: passthrough "
        f"{(1 - measured['passthrough'] / measured['strict']) * 100:.0f} % less, off "
        f"{(1 - measured['off'] / measured['strict']) * 100:.0f} % less; all three workers in "
        "this run, one after the other"
    )
    for mode, value in measured.items():
        figures.add(f"sandbox_{mode}_cpu_per_message", value, "ms")


# -- worker memory over many new sessions --------------------------------------------------------

MEMORY_SESSIONS = 40 if QUICK else 300
MEMORY_SAMPLE_EVERY = 10 if QUICK else 50
MEMORY_CONCURRENCY = 10


async def gated_run(gate: asyncio.Semaphore, client: AgentlaneClient, dep: Deployment) -> None:
    async with gate:
        await run_steps(client, dep, 1)


async def memory_case(stack: Stack, figures: Figures) -> None:
    """A worker's RSS as new sessions arrive (one 1-step run each, MEMORY_CONCURRENCY at once):
    each session leaves its session and events workflows open, in the worker's workflow cache
    until they fall out of it. SDK defaults against this worker's settings."""
    configs = [
        (
            "SDK defaults: reload sandbox, cache 1000",
            {"AGENTLANE_SANDBOX": "strict", "AGENTLANE_MAX_CACHED_WORKFLOWS": "1000"},
        ),
        (
            "passthrough, cache 1000",
            {"AGENTLANE_SANDBOX": "passthrough", "AGENTLANE_MAX_CACHED_WORKFLOWS": "1000"},
        ),
        ("no sandbox, cache 1000", {"AGENTLANE_MAX_CACHED_WORKFLOWS": "1000"}),
        ("no sandbox, cache 200", {"AGENTLANE_MAX_CACHED_WORKFLOWS": "200"}),
    ]
    marks = list(range(MEMORY_SAMPLE_EVERY, MEMORY_SESSIONS + 1, MEMORY_SAMPLE_EVERY))
    table = Table(
        f"Worker RSS (MB) after N new sessions (one 1-step run each, {MEMORY_CONCURRENCY} at once)",
        ["worker", "at start", *[f"N={n}" for n in marks], "KB/session after N=" + str(marks[0])],
    )
    for label, env in configs:
        dep = stack.deployment(**env)
        worker = dep.start_worker()
        client = await stack.client(dep)
        await run_steps(client, dep, 1)  # warm-up: imports, connections
        row: list[object] = [label, rss_mb(worker.pid)]
        gate = asyncio.Semaphore(MEMORY_CONCURRENCY)

        for _ in marks:
            await asyncio.gather(
                *(gated_run(gate, client, dep) for _ in range(MEMORY_SAMPLE_EVERY))
            )
            row.append(rss_mb(worker.pid))
        rss = [float(x) for x in row[2:]]
        per = (rss[-1] - rss[0]) * 1024 / (marks[-1] - marks[0]) if len(marks) > 1 else 0.0
        row.append(per)
        table.add(*row)
        figures.add(f"rss_after_{marks[-1]}_sessions[{label}]", rss[-1], "MB")
        dep.stop_workers()
    table.print()
    note(
        "RSS read from /proc after each batch; the slope is the growth per new session past "
        "the first batch. A session's two open workflows stay cached until the cache is full."
    )
    await aging_case(stack, figures)


AGING_SESSIONS = 4 if QUICK else 10
AGING_ROUNDS = 3 if QUICK else 30


async def next_run(client: AgentlaneClient, key: str, ws: Path, runs: int) -> None:
    receipt = await client.send_and_start(key, instruction(1), workspace=str(ws))
    assert receipt.run_id
    result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 600)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    await wait_idle(client, key, runs=runs)


async def aging_case(stack: Stack, figures: Figures) -> None:
    """The same sessions, run after run (this worker's settings): RSS as they age."""
    dep = stack.deployment()
    worker = dep.start_worker()
    client = await stack.client(dep)
    keys = [fresh_key("age") for _ in range(AGING_SESSIONS)]
    spaces = {key: workspace(dep, key) for key in keys}
    marks = sorted({1, *range(5, AGING_ROUNDS + 1, 5), AGING_ROUNDS})
    rss: list[float] = []
    for rnd in range(1, AGING_ROUNDS + 1):
        await asyncio.gather(*(next_run(client, k, spaces[k], rnd) for k in keys))
        if rnd in marks:
            rss.append(rss_mb(worker.pid))
    dep.stop_workers()
    table = Table(
        f"Worker RSS (MB) as {AGING_SESSIONS} sessions age (one 1-step run each per round)",
        ["after round", *[str(m) for m in marks]],
    )
    table.add("RSS MB", *rss)
    table.print()
    # The slope past the first rounds (imports, first connections and caches filling).
    first = 1 if len(marks) > 2 else 0
    rounds = max(marks[-1] - marks[first], 1)
    per_run = (rss[-1] - rss[first]) * 1024 / (rounds * AGING_SESSIONS)
    note(f"growth after round {marks[first]}: {per_run:.1f} KB per run")
    figures.add("rss_growth_per_run_aging", per_run, "KB")


# -- CPU per step, engine against the same-shape no-op (and an older commit) ------------------

CPU_SHORT = 5  # the short run of each pair: CPU per step is the marginal (N - short) cost


def group_cpu_seconds(pgid: int) -> float:
    """utime + stime of every live process in a process group (the worker and the dev server
    are each started as a group leader; the server may have helpers)."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        if int(fields[2]) == pgid:
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


async def noop_worker_main() -> None:
    """`--noop-worker`: the same-shape no-op loop's workers in a process of their own, so its
    CPU is read the same way as the engine worker's."""
    client = await Client.connect(os.environ["AGENTLANE_TEMPORAL_ADDRESS"])
    queue = os.environ["AGENTLANE_TASK_QUEUE"]
    async with (
        Worker(client, task_queue=queue, workflows=[NoopLoop], activities=[noop_activity]),
        Worker(client, task_queue=f"{queue}-act", activities=[noop_activity]),
    ):
        print("ready", flush=True)
        await asyncio.Event().wait()


def start_noop_worker(stack: Stack, queue: str) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env.update(AGENTLANE_TEMPORAL_ADDRESS=stack.server.address, AGENTLANE_TASK_QUEUE=queue)
    proc = subprocess.Popen(
        [sys.executable, __file__, "--noop-worker"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    stack.processes.append(proc)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise RuntimeError("the no-op worker did not start")
    return proc


@dataclass
class CpuSamples:
    """One variant's figures, one value per round."""

    worker_ms: list[float] = field(default_factory=list)
    server_ms: list[float] = field(default_factory=list)
    wall_ms: list[float] = field(default_factory=list)
    bytes_per_step: list[float] = field(default_factory=list)

    def total_ms(self) -> list[float]:
        return [w + s for w, s in zip(self.worker_ms, self.server_ms, strict=True)]


@dataclass
class Variant:
    label: str
    worker_pid: int
    run: Callable[[int], Awaitable[Chain]]  # one run of N steps; its workflow chain
    steps_of: Callable[[Chain], StepTimes]
    samples: CpuSamples = field(default_factory=CpuSamples)


async def measured(variant: Variant, server_pid: int, steps: int) -> tuple[float, float, Chain]:
    worker, server = group_cpu_seconds(variant.worker_pid), group_cpu_seconds(server_pid)
    chain = await variant.run(steps)
    await asyncio.sleep(0.2)  # the run's trailing work (session, stream) lands in this window
    return (
        group_cpu_seconds(variant.worker_pid) - worker,
        group_cpu_seconds(server_pid) - server,
        chain,
    )


async def cpu_round(variant: Variant, server_pid: int, steps: int) -> None:
    """A short and a long run back to back: CPU per step is their difference over the extra
    steps, so what a run costs once (new workflows, start, end) cancels out."""
    w_short, s_short, _ = await measured(variant, server_pid, CPU_SHORT)
    w_long, s_long, chain = await measured(variant, server_pid, steps)
    extra = steps - CPU_SHORT
    variant.samples.worker_ms.append((w_long - w_short) / extra * 1000)
    variant.samples.server_ms.append((s_long - s_short) / extra * 1000)
    variant.samples.wall_ms.append(median(variant.steps_of(chain).total) * 1000)
    variant.samples.bytes_per_step.append(chain.size / steps)


def engine_variant(label: str, client: AgentlaneClient, dep: Deployment, pid: int) -> Variant:
    async def run(steps: int) -> Chain:
        _, run_id, _ = await run_steps(client, dep, steps)
        return await workflow_chain(client.client, run_id)

    return Variant(label, pid, run, engine_steps)


def noop_variant(client: Client, queue: str, pid: int) -> Variant:
    async def run(steps: int) -> Chain:
        wid = fresh_key("noop")
        await client.execute_workflow(NoopLoop.run, args=[steps, True], id=wid, task_queue=queue)
        return await workflow_chain(client, wid)

    return Variant("same-shape no-op", pid, run, noop_steps)


def spread(values: list[float]) -> str:
    return f"{min(values):.1f}-{max(values):.1f}"


async def cpu_case(
    figures: Figures,
    rounds: int,
    steps: int,
    baseline: str | None,
    variant_envs: Sequence[str] = (),
    traced: bool = False,
) -> None:
    """The engine and the same-shape no-op (and the engine at `baseline`, and this tree under
    each of `variant_envs`' settings), each on its own
    worker process, run in turn round after round (the order rotating) so drift on a shared
    machine hits them alike; CPU of the worker and of the dev server per step beside wall."""
    async with bench_stack("bench-engine-cpu") as stack:
        server_pid = stack.server.pid()
        assert server_pid
        variants: list[Variant] = []
        receiver: OtlpReceiver | None = None
        deployments: list[tuple[str, Path | None, dict[str, str]]] = [
            ("engine (this tree)", None, {})
        ]
        old = checkout(baseline, stack.root) if baseline else None
        if baseline:
            deployments.append((f"engine at {baseline}", old, {}))
        for setting in variant_envs:
            key, _, value = setting.partition("=")
            deployments.append((f"engine, {setting}", None, {key: value}))
        if traced:
            # Spans exported over OTLP to a receiver in this process (its CPU is not counted),
            # with the worker's own export delay (1 s), as deployed.
            receiver = OtlpReceiver().start()
            otel = receiver.env("http/protobuf")
            del otel["OTEL_BSP_SCHEDULE_DELAY"]
            deployments.append(("engine (this tree), traced", None, otel))
            if baseline:
                deployments.append((f"engine at {baseline}, traced", old, otel))
        for label, tree, env in deployments:
            dep = stack.deployment(**env)
            if tree is not None:
                dep.repo = tree
            worker = dep.start_worker()
            client = await stack.client(dep)
            variants.append(engine_variant(label, client, dep, worker.pid))
        raw = await Client.connect(stack.server.address)
        queue = fresh_key("noop-q")
        noop_proc = start_noop_worker(stack, queue)
        variants.append(noop_variant(raw, queue, noop_proc.pid))
        idle = group_cpu_seconds(server_pid)
        await asyncio.sleep(2)
        idle_ms_per_s = (group_cpu_seconds(server_pid) - idle) / 2 * 1000
        for variant in variants:  # warm-up: imports, caches, connections
            await cpu_round(variant, server_pid, CPU_SHORT + 2)
            variant.samples = CpuSamples()
        for r in range(rounds):
            k = r % len(variants)
            for variant in variants[k:] + variants[:k]:
                await cpu_round(variant, server_pid, steps)
        if receiver is not None:
            receiver.stop()
    noop = variants[-1].samples
    table = Table(
        f"CPU per step ({rounds} rounds interleaved, {steps}-step minus {CPU_SHORT}-step runs; "
        "median, min-max over rounds)",
        [
            "what",
            "worker CPU ms",
            "server CPU ms",
            "CPU ms total",
            "vs no-op CPU",
            "wall ms (median step)",
            "vs no-op wall",
            "history B/step",
        ],
    )
    for variant in variants:
        got = variant.samples
        cpu_ratio = median(got.total_ms()) / median(noop.total_ms())
        wall_ratio = median(got.wall_ms) / median(noop.wall_ms)
        table.add(
            variant.label,
            f"{median(got.worker_ms):.1f} ({spread(got.worker_ms)})",
            f"{median(got.server_ms):.1f} ({spread(got.server_ms)})",
            f"{median(got.total_ms()):.1f} ({spread(got.total_ms())})",
            f"{cpu_ratio:.2f}x",
            f"{median(got.wall_ms):.1f} ({spread(got.wall_ms)})",
            f"{wall_ratio:.2f}x",
            median(got.bytes_per_step),
        )
        slug = variant.label.replace(" ", "_").replace("(", "").replace(")", "")
        figures.add(f"cpu_ms_per_step[{slug}]", median(got.total_ms()), "ms")
        figures.add(f"wall_ms_per_step[{slug}]", median(got.wall_ms), "ms")
        figures.add(f"ratio_cpu_vs_noop[{slug}]", cpu_ratio, "x")
        figures.add(f"ratio_wall_vs_noop[{slug}]", wall_ratio, "x")
        figures.add(f"history_bytes_per_step[{slug}]", median(got.bytes_per_step), "B")
    table.print()
    for variant in variants[:-1]:
        # Within each round too: the no-op ran next to it, so drift between rounds (20 % and
        # more here) cancels; the ratio of medians above does not pair them.
        got = variant.samples
        cpu = [e / n for e, n in zip(got.total_ms(), noop.total_ms(), strict=True)]
        wall = [e / n for e, n in zip(got.wall_ms, noop.wall_ms, strict=True)]
        note(
            f"{variant.label} against the no-op of its round: CPU {median(cpu):.2f}x "
            f"({min(cpu):.2f}-{max(cpu):.2f}), median wall {median(wall):.2f}x "
            f"({min(wall):.2f}-{max(wall):.2f}), median over rounds"
        )
        slug = variant.label.replace(" ", "_").replace("(", "").replace(")", "")
        figures.add(f"ratio_cpu_vs_noop_by_round[{slug}]", median(cpu), "x")
        figures.add(f"ratio_wall_vs_noop_by_round[{slug}]", median(wall), "x")
    by_label = {v.label: v.samples for v in variants}
    for label, plain in by_label.items():
        traced_samples = by_label.get(f"{label}, traced")
        if traced_samples is None:
            continue
        # Ratios within each round: the two runs are close in time, so the machine's drift
        # (which moves whole rounds by 20 % here) mostly cancels.
        cpu = [t / p for t, p in zip(traced_samples.total_ms(), plain.total_ms(), strict=True)]
        wall = [t / p for t, p in zip(traced_samples.wall_ms, plain.wall_ms, strict=True)]
        note(
            f"tracing, {label}: CPU {median(cpu):.2f}x ({min(cpu):.2f}-{max(cpu):.2f}), median "
            f"wall {median(wall):.2f}x ({min(wall):.2f}-{max(wall):.2f}): traced against "
            "untraced within each round, median over rounds"
        )
        slug = label.replace(" ", "_").replace("(", "").replace(")", "")
        figures.add(f"ratio_cpu_traced_vs_untraced[{slug}]", median(cpu), "x")
        figures.add(f"ratio_wall_traced_vs_untraced[{slug}]", median(wall), "x")
    note(
        f"the dev server idles at {idle_ms_per_s:.1f} ms CPU per second (in its figures above). "
        "CPU is read from /proc (utime + stime) of each worker's and the server's process "
        f"group around each run; a {CPU_SHORT}-step run is subtracted from the long one so a "
        "run's fixed costs cancel. Wall is the median step read from the long run's history "
        "(one call_model scheduled to the next). Load on the machine: "
        f"{os.getloadavg()[0]:.1f} (1 min) on {os.cpu_count()} cores."
    )


async def main() -> None:
    figures = Figures()
    if "--cpu" in sys.argv:
        parser = argparse.ArgumentParser(description=__doc__)
        parser.add_argument("--cpu", action="store_true")
        parser.add_argument("--rounds", type=int, default=2 if QUICK else 5)
        parser.add_argument("--steps", type=int, default=15 if QUICK else 40)
        parser.add_argument("--baseline", help="a git revision run beside this tree")
        parser.add_argument(
            "--traced",
            action="store_true",
            help="also this tree with tracing on, exported over OTLP: the tracing ratio in CPU",
        )
        parser.add_argument(
            "--variant-env",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="also this tree on a worker started with KEY=VALUE (repeatable), e.g. "
            "AGENTLANE_SANDBOX=passthrough",
        )
        args = parser.parse_args()
        await cpu_case(
            figures, args.rounds, args.steps, args.baseline, args.variant_env, args.traced
        )
        figures.print()
        return
    if os.environ.get("AGENTLANE_BENCH_ONLY") == "telemetry":
        async with bench_stack("bench-engine") as stack:
            await telemetry_case(stack, figures)
        figures.print()
        return
    if os.environ.get("AGENTLANE_BENCH_ONLY") == "sandbox":
        async with bench_stack("bench-engine") as stack:
            await sandbox_case(stack, figures)
        figures.print()
        return
    if os.environ.get("AGENTLANE_BENCH_ONLY") == "memory":
        async with bench_stack("bench-engine") as stack:
            await memory_case(stack, figures)
        figures.print()
        return
    async with bench_stack("bench-engine") as stack:
        dep = stack.deployment()
        dep.start_worker()
        client = await stack.client(dep)
        note(f"dev server {stack.server.address}; one worker process; offline model, zero latency")

        # Warm-up: first workflow/activity executions pay imports and caches.
        warm_key, _, _ = await run_steps(client, dep, 5)

        note("each run is checked to make N tool calls in N+1 model calls")
        # 1. engine time per step
        engine = StepTimes()
        per_run: list[float] = []
        for _ in range(TIMING_RUNS):
            _, run_id, _ = await run_steps(client, dep, TIMING_STEPS)
            got = engine_steps(await workflow_chain(client.client, run_id))
            per_run.append(median(got.total) * 1000)
            engine.merge(got)

        # 2. baselines
        await asyncio_loop(stack.root / "loop", 5)  # warm-up
        loop_times: list[float] = []
        for _ in range(TIMING_RUNS):
            loop_times += await asyncio_loop(stack.root / "loop", TIMING_STEPS)
        noop = await noop_loops(client.client, f"{dep.task_queue}-noop", TIMING_STEPS, TIMING_RUNS)
        shaped = await noop_loops(
            client.client, f"{dep.task_queue}-shaped", TIMING_STEPS, TIMING_RUNS, with_local=True
        )

        e_med, e_p95 = stats_ms(engine.total)
        l_med, l_p95 = stats_ms(loop_times)
        n_med, n_p95 = stats_ms(noop.total)
        s_med, s_p95 = stats_ms(shaped.total)
        table = Table(
            f"Time per step ({TIMING_RUNS} runs x {TIMING_STEPS} steps each; ms)",
            ["what", "median", "p95", "samples"],
        )
        table.add(
            "engine step (model + tool activity + workflow tasks)", e_med, e_p95, len(engine.total)
        )
        table.add(
            "  workflow tasks per step (count, median)",
            median([float(n) for n in engine.workflow_tasks]),
            "",
            len(engine.workflow_tasks),
        )
        for k, v in engine.parts.items():
            m, p = stats_ms(v)
            table.add(f"  of which {k}", m, p, len(v))
        table.add(
            "baseline 1: in-process asyncio loop, same model/tool/store",
            l_med,
            l_p95,
            len(loop_times),
        )
        table.add(
            "baseline 2: no-op activity loop (one activity per step)", n_med, n_p95, len(noop.total)
        )
        for k, v in noop.parts.items():
            m, p = stats_ms(v)
            table.add(f"  of which {k}", m, p, len(v))
        table.add(
            "baseline 3: no-op activity + no-op local activity per step (the engine's shape)",
            s_med,
            s_p95,
            len(shaped.total),
        )
        table.print()
        note(
            "method: engine and no-op steps are read from the workflows' histories: the time "
            "from one call_model (resp. no-op) ACTIVITY_TASK_SCHEDULED event to the next, split "
            "by the events in between (dispatch = scheduled -> started, run = started -> "
            "completed; what the parts do not cover is server time between a completion and "
            "the next schedule). The asyncio loop is timed with perf_counter.\n"
            f"engine median per run: {', '.join(f'{m:.1f}' for m in per_run)} ms\n"
            f"ratio engine/asyncio = {e_med / l_med:.1f}x; engine/no-op = {e_med / n_med:.1f}x; "
            f"engine/same-shape no-op = {e_med / s_med:.1f}x (an engine step holds the model "
            "call, a regular activity on its own queue, and the tool call, a local activity)"
        )
        costs = await publish_costs(client, warm_key, 30)
        diag = Table(
            "Stream round trips each engine activity makes (from this process; ms)",
            ["what", "median", "p95", "samples"],
        )
        for k, v in costs.items():
            diag.add(k, *stats_ms(v), len(v))
        diag.print()
        note(
            "activities hand their events to the worker's per-session publisher and return "
            "without waiting for the signal (a message's first text is sent at once); only a "
            "failed or cancelled attempt, a model call that showed text and run end wait for "
            "it; only a retried model attempt makes offset queries; the in-process loop above "
            "does the same work without them."
        )
        figures.add("engine_step_median", e_med, "ms")
        figures.add("engine_step_p95", e_p95, "ms")
        figures.add("asyncio_step_median", l_med, "ms")
        figures.add("asyncio_step_p95", l_p95, "ms")
        figures.add("noop_activity_step_median", n_med, "ms")
        figures.add("noop_activity_step_p95", n_p95, "ms")
        figures.add("ratio_engine_vs_asyncio", e_med / l_med, "x")
        figures.add("ratio_engine_vs_noop", e_med / n_med, "x")
        figures.add("noop_shaped_step_median", s_med, "ms")
        figures.add("noop_shaped_step_p95", s_p95, "ms")
        figures.add("ratio_engine_vs_shaped_noop", e_med / s_med, "x")

        # 3. history per step at several conversation lengths
        hist = Table(
            "History per step (run workflow chain; bytes = serialized protobuf)",
            [
                "steps",
                "wall s",
                "step median ms",
                "runs in chain",
                "events",
                "events/step",
                "bytes",
                "bytes/step",
                "call_model input first/last B",
                "session events",
                "session bytes",
                "instruction chars",
                "reply chars",
                "stream wf events/step",
            ],
        )
        sizes: dict[int, tuple[int, int]] = {}
        for steps in HISTORY_LENGTHS:
            started = time.monotonic()
            key, run_id, result = await run_steps(client, dep, steps, limit_s=900)
            wall = time.monotonic() - started
            chain = await workflow_chain(client.client, run_id)
            session = await workflow_chain(client.client, session_workflow_id(key))
            stream = await workflow_chain(client.client, events_workflow_id(key))
            inputs = [
                e.ByteSize()
                for e in chain.events
                if e.event_type == ET.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                and e.activity_task_scheduled_event_attributes.activity_type.name == CALL_MODEL
            ]
            sizes[steps] = (chain.event_count, chain.size)
            hist.add(
                steps,
                wall,
                median(engine_steps(chain).total) * 1000,
                len(chain.runs),
                chain.event_count,
                chain.event_count / steps,
                chain.size,
                chain.size / steps,
                f"{inputs[0]}/{inputs[-1]}",
                session.event_count,
                session.size,
                len(instruction(steps)),
                len(result.reply),
                stream.event_count / steps,
            )
            figures.add(f"history_events_per_step_{steps}", chain.event_count / steps, "events")
            figures.add(f"history_bytes_per_step_{steps}", chain.size / steps, "B")
            figures.add(f"session_history_bytes_{steps}", float(session.size), "B")
        hist.print()
        lo, hi = HISTORY_LENGTHS[1], HISTORY_LENGTHS[2]
        marginal = (sizes[hi][1] - sizes[lo][1]) / (hi - lo)
        note(
            f"marginal history bytes per step between {lo} and {hi} steps: {marginal:.0f} B "
            "(flat history per step means this is close to bytes/step at every length).\n"
            "The first call_model input also carries the user message. The session's history "
            "holds the user message and the run's result with its full reply (the offline "
            "model's final reply lists every tool call, so it grows with steps here)."
        )
        figures.add("history_bytes_per_step_marginal", marginal, "B")
        await codec_case(stack, figures, e_med, e_p95, sizes)
        dep.stop_workers()  # the cases below run their own workers
        await telemetry_case(stack, figures)
        await sandbox_case(stack, figures)
        await memory_case(stack, figures)

        # 4. stream history per second of streaming, per batch interval
        stream_table = Table(
            f"Stream history: `count to {STREAM_COUNT}` at {STREAM_TOKEN_MS} ms/token, "
            "one subscriber",
            [
                "batch ms",
                "stream s",
                "events wf +events",
                "events/s",
                "signals",
                "poll updates",
                "stream items",
                "text_delta items",
                "run events",
                "run bytes",
                "2-token run events/bytes",
                "reply chars",
                "visible==reply",
            ],
        )
        for batch in STREAM_BATCHES_MS:
            r = await stream_case(stack, batch)
            rate = r.added_events / r.stream_seconds
            stream_table.add(
                batch,
                r.stream_seconds,
                r.added_events,
                rate,
                r.signals,
                r.updates,
                r.items,
                r.text_items,
                r.run_events,
                r.run_bytes,
                f"{r.small_run_events}/{r.small_run_bytes}",
                r.reply_chars,
                r.reply_ok,
            )
            figures.add(f"stream_history_events_per_s_batch{batch}", rate, "events/s")
            figures.add(f"stream_items_batch{batch}", float(r.items), "items")
            figures.add(f"stream_run_history_events_batch{batch}", float(r.run_events), "events")
        stream_table.print()
        note(
            "method: events added to the session's events workflow (whole continue-as-new chain) "
            "between just before the message and the run's end, divided by the call_model "
            "activity's duration (started -> completed in the run's history). Signals are "
            "publish batches, poll updates the subscriber's long polls. The run's own history is "
            "compared with a 2-token run of the same session: its events must not grow with "
            "streaming (its bytes differ by the reply, which the run's result carries)."
        )
    figures.print()


if __name__ == "__main__":
    try:
        asyncio.run(noop_worker_main() if "--noop-worker" in sys.argv else main())
    except KeyboardInterrupt:
        sys.exit(130)
