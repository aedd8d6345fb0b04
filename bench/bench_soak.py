"""Soak: N sessions in a closed loop for M minutes, each sending its next message as soon as
its run ends; per window, whether anything grows with time (issue 26).

Each message is a 5-step run with the offline model at zero latency: read, write, exec `true`,
read, reply. Per window (5 minutes by default) it prints runs/s, run p50/p99 (send -> result),
the last step's p50 (the final model call's scheduling -> the run's completion, from the
histories of one run in `--sample`), worker and server RSS, the data dir's growth per run
(bytes of everything the deployment wrote outside Temporal: transcripts, records, payloads;
the worker log left out), the worker's and the server's CPU time per run (user + system: the
load-independent figure on a shared machine), the CPU time of a fixed reference workload run
beside them (it rises when the machine slows, whatever the engine does), payload files, and
the worker log's TMPRL1104 lines (a workflow task over the threshold, set to 1 s here with
TEMPORAL_WORKFLOW_TASK_DURATION_WARN_SECONDS).
Then SIGTERM to the worker and the time it takes to exit.

With `--compaction-reserve`, a warm-up comes first, reported as its own row and left out of the
comparison of the first window with the last: until every session's context has been compacted
once (`--warmup-max-minutes` at most). A young session's context grows from nothing, and a
model call costs more the more context it carries (the request is built from all of it, and the
offline model reads it all), so the first minutes are not the state of a long-lived session,
whose context stays between what compaction keeps and its threshold. The `context p50 tokens`
column shows it: the context at each run's last model call, from the run's result.

The server has a warm-up of its own: with a retention, it starts deleting closed workflows one
retention after the first ones closed (plus a random delay of up to
`history.retentionTimerJitterDuration`, 30 minutes by default), and from then on every run also
pays for a deletion. `--warmup-min-minutes` holds the warm-up at least that long and
`--retention-jitter` shortens that delay, so the windows compared are all in that steady state:
`--history-retention 1h --retention-jitter 1m --warmup-min-minutes 62` (1 hour is the shortest
retention the server takes).

    .venv/bin/python bench/bench_soak.py --sessions 20 --minutes 10 --window-minutes 2.5
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from temporalio.api.enums.v1 import TimeoutType, WorkflowTaskFailedCause  # noqa: E402
from temporalio.client import WorkflowHistory  # noqa: E402

from agentlane.data_converter import make_data_converter  # noqa: E402
from agentlane.ids import events_workflow_id, session_workflow_id  # noqa: E402
from agentlane.run import ExecutionStatus  # noqa: E402
from bench.common import (  # noqa: E402
    ET,
    Figures,
    Table,
    bench_stack,
    cpu_seconds,
    events_of_type,
    fresh_key,
    history_bytes,
    note,
    rss_mb,
    ts,
    workflow_chain,
    workspace,
)
from clients.api import AgentlaneClient  # noqa: E402

MESSAGE = (
    "read notes.txt then write out.txt with hi then run `true` then read out.txt then say done"
)
TASK_WARN_SECONDS = "1"


def data_bytes(root: Path) -> tuple[int, int]:
    """Bytes under the data dir (worker logs and workspaces left out) and payload files."""
    total = files = 0
    for path in root.rglob("*"):
        if path.is_file() and path.suffix != ".log" and "ws" not in path.relative_to(root).parts:
            total += path.stat().st_size
            if "payloads" in path.relative_to(root).parts and not path.name.startswith("."):
                files += 1
    return total, files


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_SLOW_TASK = re.compile(r"TMPRL1104.*")
_TASK_ID = re.compile(r"TMPRL1104\] ([0-9a-f-]+):(\d+):\d+")
_FIELD = re.compile(r"(workflow_type|workflow_task_duration|workflow_history_size|attempt)=(\S+)")


@dataclass
class SlowTasks:
    """The worker log's TMPRL1104 lines (a workflow task over the threshold), by workflow type."""

    by_type: Counter[str] = field(default_factory=Counter)
    longest_ms: dict[str, int] = field(default_factory=dict)
    largest_history: dict[str, int] = field(default_factory=dict)
    retries: int = 0  # tasks over the threshold on a second or later attempt (a replay)
    # (run id, the event id the worker names, workflow type, its duration in ms)
    tasks: list[tuple[str, int, str, int]] = field(default_factory=list)

    @property
    def count(self) -> int:
        return sum(self.by_type.values())

    def describe(self) -> str:
        if not self.by_type:
            return "none"
        return ", ".join(
            f"{kind} {n} (longest {self.longest_ms[kind]} ms, history up to "
            f"{self.largest_history[kind] // 1024} KB)"
            for kind, n in self.by_type.most_common()
        ) + (f"; {self.retries} on a retried attempt" if self.retries else "")


def slow_tasks(log_text: str) -> SlowTasks:
    out = SlowTasks()
    for match in _SLOW_TASK.finditer(_ANSI.sub("", log_text)):
        fields = dict(_FIELD.findall(match.group(0)))
        kind = fields.get("workflow_type", "?").strip('"')
        ms = int(fields.get("workflow_task_duration", "0"))
        size = int(fields.get("workflow_history_size", "0"))
        out.by_type[kind] += 1
        out.longest_ms[kind] = max(out.longest_ms.get(kind, 0), ms)
        out.largest_history[kind] = max(out.largest_history.get(kind, 0), size)
        out.retries += int(fields.get("attempt", "1")) > 1
        where = _TASK_ID.search(match.group(0))
        if where is not None:
            out.tasks.append((where.group(1), int(where.group(2)), kind, ms))
    return out


@dataclass
class ServerTimes:
    """Slow tasks as the server recorded them: started -> completed of the task the worker
    timed. The worker's clock runs from the moment it received the task until it stops
    tracking it; for a task that continued the workflow as new that includes the old run's
    eviction, which the server does not wait for."""

    seconds: list[tuple[str, float, bool]] = field(default_factory=list)  # type, s, at a CAN
    unknown: int = 0

    def over(self, limit: float) -> int:
        return sum(1 for _, took, _ in self.seconds if took > limit)

    def describe(self) -> str:
        if not self.seconds:
            return f"none found ({self.unknown} not found)" if self.unknown else "none"
        by_type: dict[str, list[float]] = {}
        for kind, took, _ in self.seconds:
            by_type.setdefault(kind, []).append(took)
        at_can = sum(1 for *_, can in self.seconds if can)
        return (
            ", ".join(
                f"{kind} {len(t)} (over 1 s: {sum(1 for x in t if x > 1)}, longest "
                f"{max(t) * 1000:.0f} ms)"
                for kind, t in sorted(by_type.items())
            )
            + f"; {at_can} of them continued as new"
            + (f"; {self.unknown} not found" if self.unknown else "")
        )


async def server_task_times(
    client: AgentlaneClient, tasks: list[tuple[str, int, str, int]]
) -> ServerTimes:
    out = ServerTimes()
    for run_id, event_id, kind, _ in tasks:
        found = None
        async for wf in client.client.list_workflows(f"RunId = '{run_id}'"):
            found = wf.id
        if found is None:
            out.unknown += 1
            continue
        history = await client.client.get_workflow_handle(found, run_id=run_id).fetch_history()
        started = {
            e.event_id: e
            for e in history.events
            if e.event_type == ET.EVENT_TYPE_WORKFLOW_TASK_STARTED
        }
        task = None
        for e in history.events:
            if e.event_type == ET.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                begun = e.workflow_task_completed_event_attributes.started_event_id
                if begun < event_id:
                    task = (started[begun], e)
        if task is None:
            out.unknown += 1
            continue
        can = history.events[-1].event_type == ET.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
        last = history.events[-1].event_id
        out.seconds.append((kind, ts(task[1]) - ts(task[0]), can and event_id > last - 3))
    return out


PERSISTENCE = re.compile(
    r"^(visibility_)?persistence_latency_(sum|count)\{"
    r'[^}]*operation="([^"]+)"[^}]*service_name="([^"]+)"[^}]*\} (\S+)$',
    re.M,
)


def persistence_totals(port: int | None) -> dict[str, list[float]]:
    """The dev server's own persistence calls so far: per `service/operation`, [count, seconds].
    Where the server's CPU per run creeps, these say which store operation grows."""
    if port is None:
        return {}
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            text = answer.read().decode()
    except OSError:
        return {}
    totals: dict[str, list[float]] = {}
    for store, kind, operation, service, value in PERSISTENCE.findall(text):
        pair = totals.setdefault(f"{store}{service}/{operation}", [0.0, 0.0])
        pair[0 if kind == "count" else 1] += float(value)
    return totals


def persistence_line(
    before: dict[str, list[float]], after: dict[str, list[float]], runs: int
) -> str:
    """The window's heaviest persistence operations: calls a run and milliseconds a call."""
    spent = []
    for name, (count, seconds) in after.items():
        count0, seconds0 = before.get(name, [0.0, 0.0])
        if count > count0:
            spent.append((seconds - seconds0, count - count0, name))
    spent.sort(reverse=True)
    total = sum(s for s, _, _ in spent)
    head = f"  persistence: {total * 1000 / max(1, runs):.0f} ms a run; "
    return head + ", ".join(
        f"{name} {count / max(1, runs):.1f}/run {seconds * 1000 / count:.2f} ms"
        for seconds, count, name in spent[:6]
    )


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# A fixed piece of work (JSON, dict building, scattered reads over 16 MB), timed by its own CPU
# clock every 5 s in a process of its own. On a shared machine the same code costs more CPU
# while neighbours contend for caches and memory: a window whose runs cost more while this
# costs more too was slowed by the machine, not by the engine. About 45 ms every 5 s.
_REFERENCE = """
import json, random, sys, time
random.seed(1)
obj = [{"id": i, "name": "x" * random.randint(5, 40), "vals": list(range(i % 20))}
       for i in range(3000)]
big = list(range(2_000_000))
random.shuffle(big)
rounds = 0
while True:
    began = time.thread_time()
    json.loads(json.dumps(obj))
    {i: str(i) for i in range(30000)}
    acc = 0
    for j in range(0, 2_000_000, 37):
        acc += big[big[j]] & 1
    if rounds:  # the first round pays for first touches of its memory
        print((time.thread_time() - began) * 1000, flush=True)
    rounds += 1
    time.sleep(5)
"""


class MachineReference:
    """`_REFERENCE` running beside the soak: its CPU ms per round, by when they arrived."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float]] = []
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _REFERENCE, stdout=asyncio.subprocess.PIPE
        )
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        async for line in self._proc.stdout:
            self.samples.append((time.monotonic(), float(line)))

    def median_between(self, begin: float, end: float) -> float:
        values = [ms for at, ms in self.samples if begin <= at < end]
        return float(sorted(values)[len(values) // 2]) if values else float("nan")

    def stop(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            self._proc.kill()
        if self._reader is not None:
            self._reader.cancel()


@dataclass
class Window:
    runs: list[float] = field(default_factory=list)  # send -> result, seconds
    # Tokens of the context at each run's last model call (the run's result says).
    contexts: list[float] = field(default_factory=list)
    last_steps: list[float] = field(default_factory=list)
    compactions: int = 0  # in the runs whose history was read
    errors: int = 0


async def last_step(client: AgentlaneClient, run_id: str) -> tuple[float | None, bool]:
    """The final model call's scheduling -> the run's completion (its reply and its end), and
    whether the run compacted its session's context."""
    history = await client.client.get_workflow_handle(run_id).fetch_history()
    compacted = bool(
        events_of_type(history.events, ET.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, "compact_context")
    )
    calls = events_of_type(history.events, ET.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, "call_model")
    done = events_of_type(history.events, ET.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)
    if not calls or not done:
        return None, compacted
    return ts(done[-1]) - ts(calls[-1]), compacted


async def stream_report(client: AgentlaneClient, keys: list[str], figures: Figures) -> None:
    """The sessions' event streams: how many segments, how big each got, and whether any
    workflow task of theirs failed or timed out (a stream that wedged would show here)."""
    segments = events = failed = 0
    largest = biggest = 0
    causes: dict[str, int] = {}
    stall = 0.0  # longest time from a failed or timed-out task to the next completed one
    expired = 0  # streams whose older segments the server deleted (past the retention)
    for key in keys:
        chain = await workflow_chain(client.client, events_workflow_id(key))
        expired += chain.expired
        segments += len(chain.runs)
        for run in chain.runs:
            largest = max(largest, len(run.events))
            biggest = max(biggest, history_bytes(run))
            events += len(run.events)
            failed_at: float | None = None
            for e in run.events:
                if e.event_type == ET.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                    cause = WorkflowTaskFailedCause.Name(
                        e.workflow_task_failed_event_attributes.cause
                    )
                    causes[cause] = causes.get(cause, 0) + 1
                elif e.event_type == ET.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
                    # SCHEDULE_TO_START: the worker did not poll its sticky queue in time (busy),
                    # and the task went to the normal queue; START_TO_CLOSE: a task ran 10 s.
                    kind = TimeoutType.Name(e.workflow_task_timed_out_event_attributes.timeout_type)
                    causes[kind] = causes.get(kind, 0) + 1
                else:
                    if e.event_type == ET.EVENT_TYPE_WORKFLOW_TASK_COMPLETED and failed_at:
                        stall = max(stall, ts(e) - failed_at)
                        failed_at = None
                    continue
                failed += 1
                failed_at = failed_at or ts(e)
    note(
        f"event streams: {segments} segments over {len(keys)} sessions, at most {largest} "
        f"events / {biggest} bytes of history in one, {failed} failed or timed-out tasks "
        f"({causes or 'none'}), longest from a failed task to the next completed one "
        f"{stall * 1000:.0f} ms"
        + (
            f"; {expired} streams' older segments already deleted (retention), not counted"
            if expired
            else ""
        )
    )
    figures.add("soak_stream_segments", segments)
    figures.add("soak_stream_segment_events_max", largest)
    figures.add("soak_stream_segment_bytes_max", biggest, "B")
    figures.add("soak_stream_failed_tasks", failed)
    figures.add("soak_stream_longest_stall", f"{stall * 1000:.0f}", "ms")


async def replay_report(client: AgentlaneClient, keys: list[str], figures: Figures) -> None:
    """How long this process takes to replay the largest segment of a session's history and of
    its event stream (what a worker pays when the workflow fell out of its cache, or its task
    timed out and is retried), and how many segments the sessions' chains have."""
    from temporalio.worker import Replayer

    from workers.main import WORKFLOWS

    replayer = Replayer(
        workflows=list(WORKFLOWS),
        data_converter=make_data_converter(Path(client.settings.data_dir)),
    )
    for label, workflow_id in (("session", session_workflow_id), ("events", events_workflow_id)):
        runs: list[WorkflowHistory] = []
        expired = 0
        for key in keys:
            chain = await workflow_chain(client.client, workflow_id(key))
            runs += chain.runs
            expired += chain.expired
        segments = len(runs)
        runs.sort(key=lambda run: len(run.events), reverse=True)
        # A closed segment's offloaded input is released by the payload gc once the segment
        # after it closed too (agentlane/payload_gc.py): no worker replays it again, so it is
        # passed over here, and counted.
        released = 0
        for largest in runs:
            took = []  # the first replay also pays the sandbox's first import of the workflows
            for _ in range(3):
                began = time.monotonic()
                result = await replayer.replay_workflow(largest, raise_on_replay_failure=False)
                took.append(time.monotonic() - began)
                if result.replay_failure is not None:
                    break
            if result.replay_failure is None or "is not in the store" not in str(
                result.replay_failure
            ):
                break
            released += 1
        else:
            continue
        failure = f", FAILED: {result.replay_failure}" if result.replay_failure else ""
        passed = (
            f" (passed over {released} larger closed ones, inputs released)" if released else ""
        )
        note(
            f"{label} histories: {segments} segments over {len(keys)} sessions"
            + (f" (older segments of {expired} deleted: retention)" if expired else "")
            + "; the largest "
            f"replayable{passed} ({len(largest.events)} events, "
            f"{history_bytes(largest) // 1024} KB) replays in "
            f"{' / '.join(f'{t * 1000:.0f}' for t in took)} ms (3 times){failure}"
        )
        figures.add(f"soak_{label}_segments", segments)
        figures.add(f"soak_{label}_replay_largest", f"{min(took) * 1000:.0f}", "ms")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--window-minutes", type=float, default=5)
    parser.add_argument("--sample", type=int, default=5, help="read the history of 1 run in N")
    parser.add_argument(
        "--context-window",
        type=int,
        default=None,
        help="the offline model's context window in tokens (default its catalogue's 200 000)",
    )
    parser.add_argument(
        "--compaction-reserve",
        type=int,
        default=None,
        help="tokens of the window kept free ([compaction] reserve_tokens): a large one makes "
        "sessions compact within minutes, so the soak reaches the steady state of weeks-old "
        "sessions (their context bounded by compaction) early",
    )
    parser.add_argument(
        "--warmup-max-minutes",
        type=float,
        default=None,
        help="the warm-up, reported apart and left out of the comparison of windows: until "
        "every session's context has been compacted once (from then on it stays between what "
        "compaction keeps and its threshold, as in a weeks-old session), at most this long "
        "(default 15 with --compaction-reserve; else 0, none: at the default window sessions "
        "would not compact within a soak). `--minutes` is counted after it",
    )
    parser.add_argument(
        "--warmup-min-minutes",
        type=float,
        default=0.0,
        help="the warm-up lasts at least this long (in windows marked warm-up): e.g. until the "
        "server deletes closed workflows as fast as it creates them (the retention + "
        "--retention-jitter + a minute)",
    )
    parser.add_argument(
        "--retention-jitter",
        default=None,
        help="the dev server's history.retentionTimerJitterDuration (e.g. 1m; Temporal's "
        "default 30m spreads the start of deletions over half an hour after the retention)",
    )
    parser.add_argument(
        "--history-retention",
        default=None,
        help="the dev server's retention of closed workflows (e.g. 1h, as README recommends "
        "for sustained load on one host; default its own, a day): its SQLite file grows by "
        "every run's history until then, and each of its database calls slows as it grows",
    )
    args = parser.parse_args()
    if args.warmup_max_minutes is None:
        args.warmup_max_minutes = 15.0 if args.compaction_reserve else 0.0
    if os.environ.get("AGENTLANE_BENCH_QUICK") == "1":
        args.sessions, args.minutes, args.window_minutes = 3, 0.5, 0.25
        args.warmup_max_minutes = min(args.warmup_max_minutes, 0.25)
        args.warmup_min_minutes = min(args.warmup_min_minutes, 0.25)
    window_s = args.window_minutes * 60
    jitter = args.retention_jitter
    if jitter is not None and re.fullmatch(r"\d+[smh]", jitter) is None:
        parser.error(f"--retention-jitter {jitter!r}: give e.g. 1m, 90s or 1h")
    dynamic_config = [f'history.retentionTimerJitterDuration="{jitter}"'] if jitter else None
    async with bench_stack(
        "soak", retention=args.history_retention, dynamic_config=dynamic_config
    ) as stack:
        dep = stack.deployment(TEMPORAL_WORKFLOW_TASK_DURATION_WARN_SECONDS=TASK_WARN_SECONDS)
        config = ""
        if args.context_window:
            config += (
                '[[models]]\nprovider = "offline"\nid = "planner"\n'
                f"context_window = {args.context_window}\n"
            )
        if args.compaction_reserve:
            config += f"[compaction]\nreserve_tokens = {args.compaction_reserve}\n"
        if config:
            (dep.data_dir / "config.toml").write_text(config)
        worker = dep.start_worker()
        client = await stack.client(dep)
        keys = [fresh_key("soak") for _ in range(args.sessions)]
        spaces = {key: workspace(dep, key) for key in keys}
        began = time.monotonic()
        warmup_min_s = args.warmup_min_minutes * 60
        warmup_cap_s = max(args.warmup_max_minutes * 60, warmup_min_s)
        # Set once the warm-up is over (its end is not known in advance).
        stop_at = [began + warmup_cap_s + args.minutes * 60]
        windows: list[Window] = [Window()]
        counter = [0]
        # The sessions whose context has been compacted at least once: a run's last call saw
        # a smaller context than the session's run before it.
        previous_context: dict[str, int] = {}
        compacted_once: set[str] = set()
        all_compacted = asyncio.Event()

        async def session(key: str) -> None:
            while time.monotonic() < stop_at[0]:
                sent = time.monotonic()
                try:
                    receipt = await client.send_and_start(key, MESSAGE, workspace=str(spaces[key]))
                    assert receipt.run_id
                    result = await client.wait_for_run(receipt.run_id)
                except Exception as err:
                    print(f"error in {key}: {err!r}", file=sys.stderr)
                    windows[-1].errors += 1
                    await asyncio.sleep(1)
                    continue
                window = windows[-1]
                if result.status != ExecutionStatus.SUCCESS or result.tool_calls != 4:
                    window.errors += 1
                window.runs.append(time.monotonic() - sent)
                context = result.usage.last_call.input
                window.contexts.append(context)
                if context < previous_context.get(key, 0):
                    compacted_once.add(key)
                    if len(compacted_once) == len(keys):
                        all_compacted.set()
                previous_context[key] = context
                counter[0] += 1
                if counter[0] % args.sample == 0:
                    step, compacted = await last_step(client, receipt.run_id)
                    window.compactions += compacted
                    if step is not None:
                        window.last_steps.append(step)

        table = Table(
            f"soak: {args.sessions} sessions, closed loop, {args.minutes:g} min"
            + (f", window {args.context_window} tokens" if args.context_window else "")
            + (
                f", compaction reserve {args.compaction_reserve}" if args.compaction_reserve else ""
            ),
            [
                "window end (min)",
                "runs",
                "runs/s",
                "context p50 tokens",
                "run p50 ms",
                "run p99 ms",
                "last step p50 ms",
                "worker CPU ms/run",
                "server CPU ms/run",
                "reference ms",
                "worker RSS MB",
                "server RSS MB",
                "data dir B/run",
                "payload files",
                f"tasks > {TASK_WARN_SECONDS} s",
                f"compactions (1 run in {args.sample})",
                "errors",
            ],
        )
        figures = Figures()
        reference = MachineReference()
        await reference.start()
        tasks = [asyncio.create_task(session(key)) for key in keys]
        base_bytes, _ = data_bytes(dep.data_dir)
        warned = 0
        cpu = (cpu_seconds(worker.pid), cpu_seconds(stack.server.pid()))
        rows: list[tuple[float, float, float, float, float]] = []
        persisted = persistence_totals(stack.server.metrics_port)
        window_start = began
        # Interrupted (Ctrl-C, SIGTERM): the sessions' loops stop with the stack.
        stack_close = stack.close

        def close() -> None:
            reference.stop()
            for task in tasks:
                task.cancel()
            stack_close()

        stack.close = close  # type: ignore[method-assign]
        warming = warmup_cap_s > 0
        all_needed = args.warmup_max_minutes > 0
        if not all_needed:
            all_compacted.set()  # no compaction to wait for: only the floor
        if warming:
            until = [
                *([f"all {len(keys)} sessions have compacted once"] if all_needed else []),
                *([f"{args.warmup_min_minutes:g} min have passed"] if warmup_min_s else []),
            ]
            note(
                f"warm-up: until {' and '.join(until)}, at most {warmup_cap_s / 60:g} min "
                "(reported apart, not compared)"
            )
        warm_over = False
        while not all(t.done() for t in tasks):
            if warming:
                floor_at, cap_at = began + warmup_min_s, began + warmup_cap_s
                # Only a long warm-up (with a floor) is cut into windows; else one row, as before.
                window_end = min(window_start + window_s, cap_at) if warmup_min_s else cap_at
                if time.monotonic() < floor_at:
                    await asyncio.sleep(max(0.0, min(window_end, floor_at) - time.monotonic()))
                else:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(
                            all_compacted.wait(),
                            timeout=max(0.0, window_end - time.monotonic()),
                        )
                now = time.monotonic()
                warm_over = (all_compacted.is_set() and now >= floor_at) or now >= cap_at
                if warm_over:
                    stop_at[0] = now + args.minutes * 60
            else:
                window_end = min(window_start + window_s, stop_at[0])
                await asyncio.wait(tasks, timeout=max(0.0, window_end - time.monotonic()))
            if time.monotonic() >= stop_at[0]:
                await asyncio.gather(*tasks)  # the runs in flight end; none starts
            w = windows[-1]
            windows.append(Window())
            size, files = data_bytes(dep.data_dir)
            log_warned = slow_tasks(worker.log.read_text(errors="replace")).count
            now = time.monotonic()
            elapsed = now - began
            reference_ms = reference.median_between(window_start, now)
            span, window_start = now - window_start, now
            now_cpu = (cpu_seconds(worker.pid), cpu_seconds(stack.server.pid()))
            runs = max(1, len(w.runs))
            worker_cpu, server_cpu = (
                (b - a) * 1000 / runs for a, b in zip(cpu, now_cpu, strict=True)
            )
            cpu = now_cpu
            per_run = (size - base_bytes) / len(w.runs) if w.runs else float("nan")
            rps = len(w.runs) / span
            worker_rss = rss_mb(worker.pid)
            table.add(
                f"{elapsed / 60:.1f}" + (" (warm-up)" if warming else ""),
                len(w.runs),
                f"{rps:.2f}",
                f"{pct(w.contexts, 0.5):.0f}",
                f"{pct(w.runs, 0.5) * 1000:.0f}",
                f"{pct(w.runs, 0.99) * 1000:.0f}",
                f"{pct(w.last_steps, 0.5) * 1000:.0f}",
                f"{worker_cpu:.0f}",
                f"{server_cpu:.0f}",
                f"{reference_ms:.1f}",
                f"{worker_rss:.0f}",
                f"{rss_mb(stack.server.pid()):.0f}",
                f"{per_run:.0f}",
                files,
                log_warned - warned,
                w.compactions,
                w.errors,
            )
            # The whole row at once: a long soak stopped early still leaves its windows.
            note(
                "  window: "
                + " | ".join(f"{h}={c}" for h, c in zip(table.headers, table.rows[-1], strict=True))
            )
            now_persisted = persistence_totals(stack.server.metrics_port)
            note(persistence_line(persisted, now_persisted, len(w.runs)))
            persisted = now_persisted
            if warming:
                if not warm_over:
                    base_bytes, warned = size, log_warned
                    continue
                warming = False
                note(
                    f"  warm-up over after {elapsed / 60:.1f} min"
                    + (
                        f": {len(compacted_once)} of {len(keys)} sessions compacted once"
                        if all_needed
                        else ""
                    )
                )
                figures.add("soak_warmup_minutes", f"{elapsed / 60:.1f}", "min")
                figures.add("soak_runs_per_s_warmup", f"{rps:.2f}")
            else:
                rows.append((rps, worker_rss, per_run, worker_cpu, reference_ms))
            base_bytes, warned = size, log_warned
        reference.stop()
        table.print()
        await stream_report(client, keys, figures)
        await replay_report(client, keys, figures)
        # SIGTERM with the sessions idle: the time until the worker process is gone.
        sent = time.monotonic()
        os.killpg(worker.pid, signal.SIGTERM)
        code = await asyncio.to_thread(worker.proc.wait, 120)
        exit_s = time.monotonic() - sent
        total_runs = sum(len(w.runs) for w in windows)
        figures.add("soak_runs", total_runs)
        figures.add("soak_runs_per_s_first", f"{rows[0][0]:.2f}")
        figures.add("soak_runs_per_s_last", f"{rows[-1][0]:.2f}")
        figures.add("soak_last_of_first", f"{rows[-1][0] * 100 / rows[0][0]:.0f}", "%")
        figures.add("soak_reference_ms_first", f"{rows[0][4]:.1f}", "ms")
        figures.add("soak_reference_ms_last", f"{rows[-1][4]:.1f}", "ms")
        figures.add("soak_worker_cpu_ms_per_run_first", f"{rows[0][3]:.0f}", "ms")
        figures.add("soak_worker_cpu_ms_per_run_last", f"{rows[-1][3]:.0f}", "ms")
        figures.add("soak_worker_rss_last", f"{rows[-1][1]:.0f}", "MB")
        figures.add("soak_data_bytes_per_run_max", f"{max(r[2] for r in rows):.0f}", "B")
        slow = slow_tasks(worker.log.read_text(errors="replace"))
        note(f"workflow tasks over {TASK_WARN_SECONDS} s: {slow.describe()}")
        figures.add("soak_tasks_over_1s", slow.count)
        by_server = await server_task_times(client, slow.tasks)
        note(f"the same tasks by the server's clock: {by_server.describe()}")
        figures.add("soak_tasks_over_1s_by_server", by_server.over(1.0))
        figures.add("soak_sigterm_exit", f"{exit_s:.1f}", "s")
        figures.add("soak_worker_exit_code", code)
        figures.print()


if __name__ == "__main__":
    asyncio.run(main())
