"""Shared setup for the benchmarks: a private dev server, worker processes, clients, history
measurements, statistics and the printed tables and `FIGURE` lines.

Everything started here is stopped by `bench_stack`'s exit, also on errors, Ctrl-C and SIGTERM,
so a failed benchmark leaves no dev server or worker behind. Set `AGENTLANE_BENCH_KEEP=1` to keep
the data folder (worker logs, transcripts, the dev server's database) for inspection.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import History, HistoryEvent
from temporalio.client import Client, WorkflowHistory
from temporalio.service import RPCError, RPCStatusCode

from agentlane.events import AgentEvent, EventKind
from agentlane.settings import Settings
from clients.api import AgentlaneClient, MessageView
from tests.harness import Deployment, devserver

ET = EventType


# -- statistics -----------------------------------------------------------------------------


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else math.nan


def p95(values: Sequence[float]) -> float:
    """Nearest-rank 95th percentile (an observed value, no interpolation)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return float(ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)])


def stats_ms(seconds: Sequence[float]) -> tuple[float, float]:
    """(median, p95) in milliseconds of durations given in seconds."""
    return median(seconds) * 1000, p95(seconds) * 1000


# -- output ---------------------------------------------------------------------------------


class Table:
    def __init__(self, title: str, headers: Sequence[str]) -> None:
        self.title = title
        self.headers = list(headers)
        self.rows: list[list[str]] = []

    def add(self, *cells: object) -> None:
        self.rows.append([_cell(c) for c in cells])

    def print(self) -> None:
        widths = [len(h) for h in self.headers]
        for row in self.rows:
            widths = [max(w, len(c)) for w, c in zip(widths, row, strict=False)]
        line = "  ".join("-" * w for w in widths)
        print(f"\n{self.title}")
        print("  ".join(h.ljust(w) for h, w in zip(self.headers, widths, strict=False)))
        print(line)
        for row in self.rows:
            print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)))
        sys.stdout.flush()


def _cell(value: object) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        return f"{value:.2f}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


@dataclass
class Figures:
    """The `FIGURE name=value unit` lines printed at the end, for updating the README."""

    items: list[tuple[str, float | str, str]] = field(default_factory=list)

    def add(self, name: str, value: float | str, unit: str = "") -> None:
        self.items.append((name, value, unit))

    def print(self) -> None:
        print()
        for name, value, unit in self.items:
            shown = _cell(value) if isinstance(value, float) else str(value)
            print(f"FIGURE {name}={shown} {unit}".rstrip())
        sys.stdout.flush()


def pct(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (an observed value)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return float(ordered[max(0, math.ceil(q * len(ordered)) - 1)])


def rss_mb(pid: int | None) -> float:
    if pid is None:
        return float("nan")
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process so far (what a run costs on a shared machine, where
    wall-clock throughput moves with everyone else's load)."""
    if pid is None:
        return float("nan")
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def note(text: str) -> None:
    print(text, flush=True)


# -- processes ------------------------------------------------------------------------------


@dataclass
class Stack:
    """One dev server (its own port and data folder) and the deployments (task queue + worker
    processes + data folder) a benchmark starts on it."""

    root: Path
    server: devserver.DevServer  # type: ignore[name-defined]
    deployments: list[Deployment] = field(default_factory=list)
    processes: list[subprocess.Popen[str]] = field(default_factory=list)
    clients: dict[str, AgentlaneClient] = field(default_factory=dict)

    def deployment(self, **extra_env: str) -> Deployment:
        """A fresh task queue with its own data folder; its workers get `extra_env`."""
        name = f"bench-{uuid.uuid4().hex[:8]}"
        data = self.root / name
        data.mkdir(parents=True)
        dep = Deployment(data_dir=data, server=self.server, task_queue=name, extra_env=extra_env)
        self.deployments.append(dep)
        return dep

    async def client(self, dep: Deployment) -> AgentlaneClient:
        if dep.task_queue not in self.clients:
            self.clients[dep.task_queue] = await AgentlaneClient.connect(settings_for(dep))
        return self.clients[dep.task_queue]

    def close(self) -> None:
        for dep in self.deployments:
            try:
                dep.stop_workers()
            except Exception as err:  # keep going: everything else must still be stopped
                print(f"warning: stopping workers of {dep.task_queue}: {err}", file=sys.stderr)
        for proc in self.processes:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
        self.server.stop()


def settings_for(dep: Deployment) -> Settings:
    """The settings a client of `dep` uses (same data folder and task queue as its workers)."""
    saved = dict(os.environ)
    try:
        os.environ.update(dep.settings_env())
        return Settings.from_env()
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@asynccontextmanager
async def bench_stack(
    name: str, retention: str | None = None, dynamic_config: list[str] | None = None
) -> AsyncIterator[Stack]:
    """Start a private dev server; stop it and every worker on exit, whatever happens.
    `retention`: how long it keeps closed workflows' histories (`6h`, `1d`; None: its default,
    a day); `dynamic_config`: `KEY=JSON_VALUE` lines beyond `temporal-dev/dynamic-config.txt`."""
    # SIGTERM (a CI timeout, `kill`) must run the clean-up below too.
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    root = Path(tempfile.mkdtemp(prefix=f"agentlane-{name}-"))
    # The server's own metrics where its script can start them (a baseline tree's may not).
    options: dict[str, Any] = (
        {"metrics_port": devserver.free_port()}
        if "metrics_port" in devserver.DevServer.__dataclass_fields__
        else {}
    )
    if retention is not None:
        options["retention"] = devserver.parse_retention(retention)
    if dynamic_config:
        options["extra_dynamic_config"] = dynamic_config
    server = devserver.DevServer(
        data_dir=root / "temporal", port=devserver.free_port(), ui_port=None, **options
    )
    server.start()
    stack = Stack(root=root, server=server)
    try:
        yield stack
    finally:
        stack.close()
        signal.signal(signal.SIGTERM, previous)
        if os.environ.get("AGENTLANE_BENCH_KEEP") == "1":
            print(f"(kept {root})", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)


def checkout(rev: str, root: Path) -> Path:
    """The tree of git revision `rev` in a folder under `root`, to run beside this one (git
    archive: no worktree is registered)."""
    repo = Path(__file__).resolve().parents[1]
    out = root / f"baseline-{rev.replace('/', '_')}"
    out.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", rev], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out


def fresh_key(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def workspace(dep: Deployment, key: str) -> Path:
    path = dep.data_dir / "ws" / key
    path.mkdir(parents=True)
    (path / "notes.txt").write_text("alpha line\nbeta line\ngamma\n")
    return path


# -- workflow histories ---------------------------------------------------------------------


def ts(event: HistoryEvent) -> float:
    return event.event_time.seconds + event.event_time.nanos / 1e9


def events_of_type(
    events: Iterable[HistoryEvent], kind: int, activity: str | None = None
) -> list[HistoryEvent]:
    out = [e for e in events if e.event_type == kind]
    if activity is not None:
        out = [
            e
            for e in out
            if e.activity_task_scheduled_event_attributes.activity_type.name == activity
        ]
    return out


def history_bytes(history: WorkflowHistory) -> int:
    """Serialized (protobuf) size of the history: what Temporal's size limits count."""
    return History(events=history.events).ByteSize()


@dataclass
class Chain:
    """All runs of one workflow id, oldest first (continue-as-new makes several)."""

    runs: list[WorkflowHistory]
    # Its older runs are gone: the server deleted them after the namespace's retention.
    expired: bool = False

    @property
    def events(self) -> list[HistoryEvent]:
        return [e for h in self.runs for e in h.events]

    @property
    def event_count(self) -> int:
        return sum(len(h.events) for h in self.runs)

    @property
    def size(self) -> int:
        return sum(history_bytes(h) for h in self.runs)


async def workflow_chain(client: Client, workflow_id: str) -> Chain:
    """Follow continue-as-new backwards from the latest run through each run's
    `continued_execution_run_id` (no dependence on visibility, which lags). The walk ends at a
    run the server has deleted (past the retention): the chain holds what is left."""
    runs: list[WorkflowHistory] = []
    run_id: str | None = None
    expired = False
    while True:
        try:
            history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND or not runs:
                raise
            expired = True
            break
        runs.append(history)
        started = history.events[0].workflow_execution_started_event_attributes
        run_id = started.continued_execution_run_id or None
        if run_id is None:
            break
    runs.reverse()
    return Chain(runs, expired)


# -- watching the event stream ------------------------------------------------------------


@dataclass
class Seen:
    at: float  # time.monotonic() when the client received the event
    event: AgentEvent
    fresh: str | None  # newly visible text (MessageView.apply)


class Watcher:
    """Subscribes to a session's stream from an offset and timestamps what arrives, until the
    first `agent_end` (the session is idle when a watcher starts, so that is this run's end)."""

    def __init__(self, client: AgentlaneClient, key: str, from_offset: int) -> None:
        self.client = client
        self.key = key
        self.from_offset = from_offset
        self.seen: list[Seen] = []
        self.view = MessageView()
        self.new_text = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def start(self) -> Watcher:
        self.task = asyncio.create_task(self._go())
        return self

    async def _go(self) -> None:
        async for item in self.client.watch(self.key, self.from_offset):
            fresh = self.view.apply(item.event)
            self.seen.append(Seen(time.monotonic(), item.event, fresh))
            if fresh:
                self.new_text.set()
            if item.event.kind == EventKind.AGENT_END:
                return

    async def wait(self, limit_s: float = 120) -> None:
        assert self.task is not None
        await asyncio.wait_for(self.task, limit_s)

    async def cancel(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
            with suppress(asyncio.CancelledError):
                await self.task

    def text_arrivals(self) -> list[Seen]:
        return [s for s in self.seen if s.fresh]

    def first(self, kind: EventKind) -> Seen | None:
        return next((s for s in self.seen if s.event.kind == kind), None)

    def visible(self, run_id: str) -> str:
        return "".join(s.fresh or "" for s in self.seen if s.event.run_id == run_id)


async def wait_idle(client: AgentlaneClient, key: str, runs: int, limit_s: float = 120) -> None:
    """Until the session has finished `runs` runs and has nothing queued."""
    from agentlane.session import SessionPhase

    async def go() -> None:
        while True:
            status = await client.status(key)
            idle = status.phase == SessionPhase.IDLE and not status.queue_length
            if status.runs >= runs and idle:
                return
            await asyncio.sleep(0.05)

    await asyncio.wait_for(go(), limit_s)


RESULT_PREFIX = "RESULT "


def measured_at(rev: str, script: Path, script_args: list[str]) -> dict[str, float]:
    """`script`'s figures (its `--result-only` line) run from a `git archive` of `rev`: the
    engine (client, worker, workflows) is the revision's, the measuring code this tree's
    (`script`, `bench_control.py` and this module are copied over)."""
    root = Path(tempfile.mkdtemp(prefix=f"agentlane-{script.stem}-baseline-"))
    try:
        tree = checkout(rev, root)
        for harness in (script, script.with_name("bench_control.py"), Path(__file__)):
            shutil.copy(harness, tree / "bench" / harness.name)
        done = subprocess.run(
            [sys.executable, f"bench/{script.name}", *script_args, "--result-only"],
            cwd=tree,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        for line in done.stdout.splitlines():
            if line.startswith(RESULT_PREFIX):
                result: dict[str, float] = json.loads(line[len(RESULT_PREFIX) :])
                return result
        raise RuntimeError(f"baseline at {rev} gave no result: {done.stderr[-3000:]}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def baseline_options(parser: argparse.ArgumentParser) -> None:
    """`--baseline REV` (measured first, in the same run) and the baseline run's own switch."""
    parser.add_argument("--baseline", default=None, help="a git revision to measure first")
    parser.add_argument("--result-only", action="store_true", help=argparse.SUPPRESS)


def beside_baseline(
    title: str,
    ours: Callable[[], dict[str, float]],
    *,
    script: Path,
    script_args: list[str],
    baseline: str | None,
    result_only: bool,
) -> list[tuple[str, dict[str, float]]]:
    """The baseline's figures (when given), then this tree's, printed side by side; with
    `result_only` (the baseline's own run) only this tree's, as one machine-read line."""
    runs: list[tuple[str, dict[str, float]]] = []
    if baseline:
        runs.append((baseline, measured_at(baseline, script, script_args)))
    mine = ours()
    if result_only:
        print(RESULT_PREFIX + json.dumps(mine), flush=True)
        return []
    runs.append(("this tree", mine))
    table = Table(title, ["figure", *(label for label, _ in runs)])
    for name in mine:
        table.add(name, *(r[name] for _, r in runs))
    table.print()
    return runs
