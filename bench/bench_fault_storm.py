"""A fault storm: many fresh sessions at once on a few auth profiles while the provider answers
429 to a share of the calls and stalls a few, beside the same storm with no faults.

    python bench/bench_fault_storm.py            (from the repository root, with the venv's Python)
    python bench/bench_fault_storm.py --quick    (20 sessions: a smoke run)

One dev server, one worker process, the fake provider server (`tests/fakes/provider_server.py`,
its own process) as an Anthropic model with three stored profiles (`AuthStore.set_key`). Each
session gets one message; the reply is one plain text (one model call when nothing fails). The
storm's faults come from the fake server's chaos mode (seeded): a real-shaped 429 (no
Retry-After), or a stream that sends its first delta then goes silent for longer than the
session's idle timeout. What the run makes of each is the engine's decision, reported as it is.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import sqlite3
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

from temporalio.api.common.v1 import Payload  # noqa: E402
from temporalio.api.history.v1 import HistoryEvent  # noqa: E402
from temporalio.client import Client  # noqa: E402

from activities.auth_store import AuthStore  # noqa: E402
from agentlane.model_calls import CALL_MODEL  # noqa: E402
from agentlane.profile_listing import LIST_PROFILES, UPDATE_PROFILE_USAGE  # noqa: E402
from agentlane.run import ExecutionResult, ExecutionStatus  # noqa: E402
from bench.common import (  # noqa: E402
    ET,
    Chain,
    Figures,
    Table,
    bench_stack,
    fresh_key,
    median,
    note,
    ts,
    workflow_chain,
)
from clients.api import AgentlaneClient  # noqa: E402
from tests.fakes.provider_server import FakeProviderClient, spawn  # noqa: E402
from tests.fakes.scripts import Chaos  # noqa: E402
from tests.harness import Deployment  # noqa: E402
from tests.store_support import clear_profile_state  # noqa: E402

PROVIDER = "anthropic"
MODEL_ID = "fake-claude"
MODEL = f"{PROVIDER}/{MODEL_ID}"
PROFILES = [f"{PROVIDER}:storm-{i}" for i in (1, 2, 3)]
KEYS = {pid: f"sk-ant-storm-{i}-{os.urandom(6).hex()}" for i, pid in enumerate(PROFILES, 1)}
RATE_LIMIT = 0.3
STALL = 0.02
# The session's idle timeout is cut from 120 s so a stall costs seconds; the stall outlasts it
# so every stall is one the run must notice (it ends with the idle timeout, not the stream).
IDLE_TIMEOUT_S = 3
STALL_SECONDS = 6.0
SEND_CONCURRENCY = 50  # sends in flight at once; every run may be in flight together
POLL_S = 0.02  # how often the shared cooldown store is read during a storm
# A request counts against a window once it arrived this long after the window was written
# (file mtime): the mtime's own granularity and the two processes' clocks, nothing more.
EPSILON_S = 0.05
TAG = re.compile(r"storm (\S+?):")
MARK_SUMMARY = re.compile(r"mark (\S+): ")


@dataclass(frozen=True)
class Counts:
    sessions: int
    limit_s: float  # a storm's runs that have no result by then are reported as unfinished


FULL = Counts(200, 1500)
QUICK = Counts(20, 400)


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (an observed value)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return float(ordered[max(0, math.ceil(q * len(ordered)) - 1)])


# -- the shared cooldown store, watched --------------------------------------------------------


@dataclass
class Version:
    """One content of the shared profile state: when the poller first saw it and each
    profile's unusable-until (the later of cooldown and disable), None when usable."""

    written: float
    until: dict[str, float | None]


class StorePoller:
    """Reads the shared profile rows of the embedded store (`data/agentlane.db`, SQLite) every
    `POLL_S` on its own thread (the bench's event loop is busy with hundreds of clients) and
    keeps every distinct content with the time it was first seen. A read is one transaction, so
    it sees one whole version; a version replaced within `POLL_S` is missed, which can only make
    a window look younger than it is (`Window.start` also takes the runs' own record of the
    write, see `RunFacts.marks`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.versions: list[Version] = []
        self.errors: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._go, name="store-poller", daemon=True)
        self._last: int | None = None
        self.longest_gap = 0.0  # between two reads: how late a version can have been seen

    def start(self) -> StorePoller:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._read()  # the last version, written after the last poll

    def _go(self) -> None:
        previous = time.monotonic()
        while not self._stop.wait(POLL_S):
            self._read()
            now = time.monotonic()
            self.longest_gap = max(self.longest_gap, now - previous)
            previous = now

    def _read(self) -> None:
        try:
            with sqlite3.connect(self.path, timeout=5) as db:
                rows = db.execute("SELECT profile_id, usage, version FROM profile_usage").fetchall()
            stamp = hash(tuple(sorted((p, v) for p, _, v in rows)))
            if stamp == self._last:
                return
            usage = {p: json.loads(u) for p, u, _ in rows}
        except (sqlite3.Error, ValueError) as err:
            self.errors[type(err).__name__] += 1
            return
        self._last = stamp
        self.versions.append(Version(time.time(), {pid: _until(u) for pid, u in usage.items()}))


def _until(usage: dict[str, object]) -> float | None:
    ends = [
        float(v)
        for v in (usage.get("cooldown_until"), usage.get("disabled_until"))
        if isinstance(v, int | float) and math.isfinite(v) and v > 0
    ]
    return max(ends) if ends else None


@dataclass
class Window:
    profile: str
    start: float  # written (mtime of the first version that held it)
    until: float  # what it said
    end: float  # until, or earlier when a later version cleared it (a recovery)


def windows_of(versions: list[Version], marks: list[Mark]) -> list[Window]:
    """Cooldown windows per profile as the store held them. Every cooldown here is the one
    model's, so a model-scoped rate limit counts for the whole profile. A window starts at the
    first sure sign of it: the mtime of the first version the poller saw holding it, or the
    history event of the run's write, whichever is earlier (never before the real write)."""
    out: list[Window] = []
    open_: dict[str, Window] = {}
    for version in sorted(versions, key=lambda v: v.written):
        for pid in set(open_) | set(version.until):
            until = version.until.get(pid)
            current = open_.get(pid)
            if current is not None and until == current.until:
                continue
            if current is not None:
                current.end = min(current.until, version.written)
                del open_[pid]
            if until is not None and until > version.written:
                window = Window(pid, version.written, until, until)
                open_[pid] = window
                out.append(window)
    for window in out:
        written = [m.at for m in marks if (m.profile, m.until) == (window.profile, window.until)]
        window.start = min([window.start, *written])
    return out


@dataclass(frozen=True)
class Mark:
    """A write to the store as the run that made it recorded it (an applied
    UPDATE_PROFILE_USAGE: the profile from its summary, the window from its result)."""

    profile: str
    until: float | None
    at: float  # its marker event (the workflow task's completion): after the write


# -- one storm -------------------------------------------------------------------------------


@dataclass
class Session:
    key: str
    run_id: str = ""
    sent: float = 0.0  # time.monotonic() when send was called
    done: float = 0.0  # time.monotonic() when the run's result arrived
    result: ExecutionResult | None = None
    problem: str = ""  # the send or the wait raised, or no result in time

    @property
    def ok(self) -> bool:
        return self.result is not None and self.result.status == ExecutionStatus.SUCCESS

    @property
    def seconds(self) -> float:
        return self.done - self.sent


@dataclass
class Request:
    session: str | None
    profile: str | None
    at: float
    outcome: str


@dataclass
class RunFacts:
    """What a run's history (its whole continue-as-new chain) says."""

    events: int = 0
    model_calls: int = 0  # call_model activities scheduled
    lists: int = 0  # LIST_PROFILES local activities: reads of the shared store
    writes: int = 0  # UPDATE_PROFILE_USAGE that the store applied
    conflicts: int = 0  # UPDATE_PROFILE_USAGE refused by compare-and-set (someone else wrote)
    waits: int = 0  # durable timers waiting for a cooling profile
    marks: list[Mark] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)


@dataclass(frozen=True)
class Read:
    """A LIST_PROFILES read of the store, bounded in time: scheduled at `after` (the marker's
    `original_schedule_time`, the worker's wall clock) and over by `by` (the marker event: the
    workflow task that carried its result completed). The marker's `complete_time` is no bound:
    it is the task's start plus the activity's run time, earlier than the real end."""

    after: float
    by: float


@dataclass(frozen=True)
class Call:
    scheduled: float  # the call_model ACTIVITY_TASK_SCHEDULED event
    read: Read | None  # the last store read before it: what the profile was chosen on


@dataclass
class Storm:
    label: str
    sessions: list[Session]
    requests: list[Request]
    windows: list[Window]
    file_versions: int
    poll_errors: Counter[str]
    poll_gap: float
    wall_s: float
    facts: dict[str, RunFacts]  # by session key
    t0: float  # epoch seconds when the first message was sent

    @property
    def completed(self) -> list[Session]:
        return [s for s in self.sessions if s.ok]

    def outcomes(self) -> Counter[str]:
        return Counter(r.outcome for r in self.requests)


def _json_payload(payloads: Sequence[Payload]) -> object:
    """The first payload's value when it is JSON (a None result is `binary/null`, no data)."""
    if not payloads or payloads[0].metadata.get("encoding") != b"json/plain":
        return None
    try:
        return json.loads(payloads[0].data)
    except ValueError:
        return None


def _marker(event: HistoryEvent) -> tuple[str, dict[str, object], dict[str, object]] | None:
    """A local activity's (type, data, result) from its marker."""
    attrs = event.marker_recorded_event_attributes
    if attrs.marker_name != "core_local_activity" or "data" not in attrs.details:
        return None
    data = _json_payload(attrs.details["data"].payloads)
    if not isinstance(data, dict):
        return None
    result = _json_payload(attrs.details["result"].payloads) if "result" in attrs.details else {}
    return str(data.get("activity_type", "")), data, result if isinstance(result, dict) else {}


def _seconds(value: object) -> float | None:
    if not isinstance(value, dict):
        return None
    return float(value.get("seconds", 0)) + float(value.get("nanos", 0)) / 1e9


def _summary(event: HistoryEvent) -> str:
    if not event.HasField("user_metadata") or not event.user_metadata.summary.data:
        return ""
    try:
        return str(json.loads(event.user_metadata.summary.data))
    except ValueError:
        return ""


def run_facts(chain: Chain) -> RunFacts:
    facts = RunFacts(events=chain.event_count)
    last_read: Read | None = None
    task_started = 0.0
    for event in chain.events:
        if event.event_type == ET.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            task_started = ts(event)  # a lower bound when a marker has no schedule time
        elif event.event_type == ET.EVENT_TYPE_MARKER_RECORDED:
            marker = _marker(event)
            if marker is None:
                continue
            kind, data, result = marker
            if kind == LIST_PROFILES:
                facts.lists += 1
                scheduled = _seconds(data.get("original_schedule_time"))
                last_read = Read(scheduled or task_started, ts(event))
            elif kind == UPDATE_PROFILE_USAGE:
                if not result.get("applied"):
                    facts.conflicts += 1
                    continue
                facts.writes += 1
                named = MARK_SUMMARY.match(_summary(event))
                current = result.get("current")
                if named and isinstance(current, dict):
                    facts.marks.append(Mark(named.group(1), _until(current), ts(event)))
        elif event.event_type == ET.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            if attrs.activity_type.name == CALL_MODEL:
                facts.model_calls += 1
                facts.calls.append(Call(ts(event), last_read))
        elif event.event_type == ET.EVENT_TYPE_TIMER_STARTED and _summary(event).startswith(
            "wait for a"
        ):
            facts.waits += 1
    return facts


async def one_storm(
    label: str,
    client: AgentlaneClient,
    dep: Deployment,
    fake: FakeProviderClient,
    counts: Counts,
    chaos: Chaos | None,
) -> Storm:
    """Every session sent at once (at most `SEND_CONCURRENCY` sends in flight), each waited
    for until its run's result; the shared store watched meanwhile."""
    state = dep.data_dir / "agentlane.db"
    clear_profile_state(dep.data_dir)  # no cooldown carried over from an earlier storm
    await asyncio.to_thread(fake.reset)
    if chaos is not None:
        await asyncio.to_thread(fake.chaos, chaos)
    poller = StorePoller(state).start()
    prefix = fresh_key(label)
    sessions = [Session(f"{prefix}-{i}") for i in range(counts.sessions)]
    ws = dep.data_dir / "ws"
    ws.mkdir(exist_ok=True)
    gate = asyncio.Semaphore(SEND_CONCURRENCY)
    started = time.monotonic()
    t0 = time.time()
    deadline = started + counts.limit_s

    async def one(s: Session) -> None:
        async with gate:
            s.sent = time.monotonic()
            try:
                receipt = await client.send_and_start(
                    s.key,
                    f"storm {s.key}: answer in one word",
                    workspace=str(ws),
                    model=MODEL,
                    session_overrides={"idle_timeout_seconds": IDLE_TIMEOUT_S},
                )
            except Exception as err:  # reported, never hidden
                s.problem = f"send raised {type(err).__name__}: {err}"
                return
        s.run_id = receipt.run_id or ""
        if not s.run_id:
            s.problem = f"send did not start a run: {receipt.disposition.value} {receipt.note}"
            return
        handle = client.client.get_workflow_handle(s.run_id, result_type=ExecutionResult)
        try:
            s.result = await asyncio.wait_for(handle.result(), deadline - time.monotonic())
            s.done = time.monotonic()
        except TimeoutError:
            s.problem = f"no result within {counts.limit_s:.0f} s of the storm's start"
        except Exception as err:
            s.problem = f"waiting for the result raised {type(err).__name__}: {err}"

    await asyncio.gather(*(one(s) for s in sessions))
    wall = time.monotonic() - started
    await asyncio.to_thread(poller.stop)
    if chaos is not None:
        await asyncio.to_thread(fake.chaos)  # off: nothing after the storm is a fault
    raw = await asyncio.to_thread(fake.requests)
    profile_of = {key: pid for pid, key in KEYS.items()}
    requests = []
    for r in raw:
        found = TAG.search(json.dumps((r.get("body") or {}).get("messages", "")))
        requests.append(
            Request(
                session=found.group(1) if found else None,
                profile=profile_of.get(r.get("key") or ""),
                at=float(r["at"]),
                outcome=str(r["outcome"]),
            )
        )
    for s in sessions:
        if s.problem and s.run_id:
            s.problem += await describe_session(client, s.key)
    facts = await histories(client.client, sessions)
    marks = [m for f in facts.values() for m in f.marks]
    windows = windows_of(poller.versions, marks)
    return Storm(
        label,
        sessions,
        requests,
        windows,
        len(poller.versions),
        poller.errors,
        poller.longest_gap,
        wall,
        facts,
        t0,
    )


async def describe_session(client: AgentlaneClient, key: str) -> str:
    try:
        status = await client.status(key)
    except Exception as err:
        return f" (status raised {type(err).__name__})"
    waiting = f" waiting {status.waiting_reason}" if status.waiting_reason else ""
    return f" (session {status.phase.value}{waiting}, profile {status.profile_id})"


async def histories(client: Client, sessions: list[Session]) -> dict[str, RunFacts]:
    gate = asyncio.Semaphore(8)
    out: dict[str, RunFacts] = {}

    async def one(s: Session) -> None:
        if not s.run_id:
            return
        async with gate:
            try:
                out[s.key] = run_facts(await workflow_chain(client, s.run_id))
            except Exception as err:  # a run that never started has no history
                note(f"history of {s.run_id}: {type(err).__name__}: {err}")

    await asyncio.gather(*(one(s) for s in sessions))
    return out


# -- analysis --------------------------------------------------------------------------------


@dataclass
class CooledUse:
    """A request made with a profile inside one of its cooldown windows."""

    request: Request
    window: Window
    call: Call | None  # the run's call that made it

    @property
    def lag(self) -> float:
        return self.request.at - self.window.start

    @property
    def decided(self) -> str:
        """When the run chose the profile, against the window's write: `after` (its store read
        began after the write: it saw the window and chose the profile anyway, the wrong use
        the target is about), `before` (the read was over before the write: the call was
        already on its way, waiting for a model-call slot or in dispatch, when another run's
        failure was written), `during` (the two overlap), or `unknown` (no history)."""
        read = self.call.read if self.call else None
        if read is None:
            return "unknown"
        if read.after > self.window.start + EPSILON_S:
            return "after"
        return "before" if read.by < self.window.start else "during"


def cooled_uses(storm: Storm) -> list[CooledUse]:
    by_profile: dict[str, list[Window]] = {}
    for w in storm.windows:
        by_profile.setdefault(w.profile, []).append(w)
    out = []
    for r in storm.requests:
        if r.profile is None:
            continue
        for w in by_profile.get(r.profile, []):
            if w.start + EPSILON_S < r.at < w.end:
                out.append(CooledUse(r, w, call_of(storm, r)))
                break
    return out


def call_of(storm: Storm, request: Request) -> Call | None:
    """The call that made `request`: the last call_model its run scheduled before the request
    arrived (a Temporal retry of that call is the same call)."""
    facts = storm.facts.get(request.session or "")
    before = [call for call in (facts.calls if facts else []) if call.scheduled <= request.at]
    return before[-1] if before else None


@dataclass
class Summary:
    completed: int
    calls_per_completed: float
    p50: float
    p99: float


def summarise(storm: Storm) -> Summary:
    done = storm.completed
    times = [s.seconds for s in done]
    calls = len(storm.requests) / len(done) if done else math.nan
    return Summary(len(done), calls, pct(times, 0.5), pct(times, 0.99))


def endings(storm: Storm) -> Table:
    table = Table(f"{storm.label}: how the runs ended", ["ending", "runs", "example"])
    seen: Counter[str] = Counter()
    example: dict[str, str] = {}
    for s in storm.sessions:
        if s.result is None:
            kind = "no result"
            text = s.problem
        else:
            r = s.result
            error = r.error
            failure = error.failure if error else None
            kind = " / ".join(
                part
                for part in (
                    r.status.value,
                    r.termination_reason.value,
                    error.kind.value if error else "",
                    f"{failure.reason} {failure.status or ''}".strip() if failure else "",
                )
                if part
            )
            text = (error.message if error else r.reply)[:110]
        seen[kind] += 1
        example.setdefault(kind, text)
    for kind, n in seen.most_common():
        table.add(kind, n, example[kind])
    return table


def per_session_calls(storm: Storm) -> dict[str, Counter[str]]:
    out: dict[str, Counter[str]] = {}
    for r in storm.requests:
        if r.session is not None:
            out.setdefault(r.session, Counter())[r.outcome] += 1
    return out


def fates_of_faults(storm: Storm) -> Table:
    """What became of the runs that met each kind of fault (some met several)."""
    calls = per_session_calls(storm)
    table = Table(
        f"{storm.label}: runs that met a fault, by how they ended",
        ["fault met", "runs", "success", "other endings"],
    )
    by_key = {s.key: s for s in storm.sessions}
    for fault in ("429", "stall"):
        met = [by_key[k] for k, c in calls.items() if c[fault] and k in by_key]
        other = Counter(
            (s.result.termination_reason.value if s.result else "no result")
            for s in met
            if not s.ok
        )
        table.add(fault, len(met), sum(s.ok for s in met), dict(other) or "-")
    return table


# -- main --------------------------------------------------------------------------------------


def write_config(dep: Deployment, fake_url: str) -> None:
    (dep.data_dir / "config.toml").write_text(
        f"""
[[models]]
provider = "{PROVIDER}"
id = "{MODEL_ID}"
api = "anthropic"
base_url = "{fake_url}"
"""
    )
    store = AuthStore.for_data_dir(dep.data_dir)
    for pid, key in KEYS.items():
        store.set_key(pid, PROVIDER, key)


def check_worker(dep: Deployment) -> str:
    for w in dep.workers:
        code = w.proc.poll()
        if code is not None:
            tail = w.log.read_text(errors="replace").splitlines()[-5:]
            return f"worker pid {w.pid} exited with code {code}; log ends: {tail}"
    return ""


async def main(counts: Counts, seed: int, retry_after: float | None = None) -> int:
    """Returns the number of targets missed (and problems seen)."""
    # The workers inherit this environment: no key or config but the bench's own.
    for name in list(os.environ):
        if name in ("ANTHROPIC_API_KEY", "AGENTLANE_CONFIG") or name.startswith("AGENTLANE_KEY_"):
            del os.environ[name]
    figures = Figures()
    problems: list[str] = []
    wall_started = time.monotonic()
    async with bench_stack("bench-fault-storm") as stack:
        proc, fake_url = spawn(
            extra_args=[a for k in KEYS.values() for a in ("--anthropic-key", k)]
        )
        stack.processes.append(proc)
        fake = FakeProviderClient(fake_url, timeout=60)
        dep = stack.deployment()
        write_config(dep, fake_url)
        dep.start_worker()
        client = await stack.client(dep)
        chaos = Chaos(
            rate_limit=RATE_LIMIT,
            stall=STALL,
            stall_seconds=STALL_SECONDS,
            seed=seed,
            only_api="anthropic",
            retry_after=retry_after,
        )
        note(
            f"dev server {stack.server.address}; one worker process; fake provider {fake_url}; "
            f"{counts.sessions} sessions per storm on {len(PROFILES)} profiles; chaos "
            f"{RATE_LIMIT:.0%} 429 (Retry-After: {retry_after or 'none'}) / {STALL:.0%} stall "
            f"{STALL_SECONDS:.0f} s (seed {seed}); "
            f"idle timeout {IDLE_TIMEOUT_S} s; started {time.strftime('%H:%M:%S')}"
        )
        # Warm-up: the worker's first workflows and SDK imports are not part of either storm.
        warm = await client.send_and_start(
            fresh_key("warm"),
            "storm warm: hi",
            model=MODEL,
            workspace=str(dep.data_dir),
            session_overrides={"idle_timeout_seconds": 30},
        )
        await client.wait_for_run(warm.run_id or "")

        base = await one_storm("baseline", client, dep, fake, counts, None)
        note(f"baseline storm done in {base.wall_s:.0f} s: {len(base.completed)} completed")
        storm = await one_storm("storm", client, dep, fake, counts, chaos)
        note(f"fault storm done in {storm.wall_s:.0f} s: {len(storm.completed)} completed")
        if gone := check_worker(dep):
            problems.append(gone)

    for s in (base, storm):
        endings(s).print()
    fates_of_faults(storm).print()

    b, f = summarise(base), summarise(storm)
    n = counts.sessions
    outcomes = storm.outcomes()
    table = Table(
        "the two storms",
        [
            "",
            "runs completed",
            "model calls / completed run",
            "time to result p50 s",
            "p99 s",
            "calls: ok / 429 / stall",
            "wall s",
        ],
    )
    for label, s, x in (("no faults", base, b), ("fault storm", storm, f)):
        o = s.outcomes()
        table.add(
            label,
            f"{x.completed}/{n}",
            x.calls_per_completed,
            x.p50,
            x.p99,
            f"{o['ok']} / {o['429']} / {o['stall']}",
            s.wall_s,
        )
    table.print()

    per_run = [
        sum(c.values())
        for k, c in per_session_calls(storm).items()
        if any(s.key == k and s.ok for s in storm.sessions)
    ]
    note(
        f"model calls per completed run in the storm: median {median(per_run):.0f}, "
        f"p99 {pct([float(v) for v in per_run], 0.99):.0f}, max {max(per_run, default=0)}"
    )

    uses = cooled_uses(storm)
    stale = [u for u in uses if u.decided == "after"]
    decided = Counter(u.decided for u in uses)
    by_profile = Table(
        "fault storm: the shared cooldown store, per profile",
        [
            "profile",
            "requests",
            "429s",
            "windows written",
            "cooled s",
            "requests in a window",
            "of them chosen after it was written",
        ],
    )
    for pid in PROFILES:
        mine = [r for r in storm.requests if r.profile == pid]
        wins = [w for w in storm.windows if w.profile == pid]
        by_profile.add(
            pid,
            len(mine),
            sum(r.outcome == "429" for r in mine),
            len(wins),
            sum(w.end - w.start for w in wins),
            sum(u.request.profile == pid for u in uses),
            sum(u.request.profile == pid for u in stale),
        )
    by_profile.print()
    if uses:
        lags = [u.lag for u in uses]
        note(
            f"requests inside a window written > {EPSILON_S * 1000:.0f} ms before them: "
            f"{len(uses)}; arrival after the write p50 {median(lags):.2f} s, max {max(lags):.2f} s;"
            f" the profile chosen on a store read made after the write: {decided['after']},"
            f" before it (already on its way): {decided['before']}, overlapping it:"
            f" {decided['during']}, unknown: {decided['unknown']}"
        )
    if stale:
        rel = Table(
            "fault storm: calls whose profile was chosen after its window was written "
            "(seconds from the storm's start)",
            [
                "session",
                "profile",
                "window written",
                "until",
                "store read from",
                "to",
                "call scheduled",
                "request",
            ],
        )
        for u in stale[:10]:
            rel.add(
                u.request.session,
                u.request.profile,
                u.window.start - storm.t0,
                u.window.until - storm.t0,
                (u.call.read.after if u.call and u.call.read else math.nan) - storm.t0,
                (u.call.read.by if u.call and u.call.read else math.nan) - storm.t0,
                (u.call.scheduled if u.call else math.nan) - storm.t0,
                u.request.at - storm.t0,
            )
        rel.print()
    if storm.poll_errors:
        note(f"store poll errors: {dict(storm.poll_errors)}")

    def facts_of(s: Storm) -> list[RunFacts]:
        return list(s.facts.values())

    bf, sf = facts_of(base), facts_of(storm)
    failures = outcomes["429"] + outcomes["stall"]
    writes = sum(x.writes for x in sf)
    conflicts = sum(x.conflicts for x in sf)
    extra_lists = sum(x.lists for x in sf) - sum(x.lists for x in bf) * len(sf) / max(1, len(bf))
    events_b = [float(x.events) for x in bf]
    events_s = [float(x.events) for x in sf]
    extra_events = sum(events_s) - (sum(events_b) / max(1, len(events_b))) * len(events_s)
    cost = Table(
        "the state store's cost",
        [
            "",
            "run history events p50",
            "p99",
            "store reads / run",
            "store writes",
            "CAS conflicts",
            "cooldown waits / run",
        ],
    )
    for label, xs in (("no faults", bf), ("fault storm", sf)):
        cost.add(
            label,
            median([float(x.events) for x in xs]),
            pct([float(x.events) for x in xs], 0.99),
            sum(x.lists for x in xs) / max(1, len(xs)),
            sum(x.writes for x in xs),
            sum(x.conflicts for x in xs),
            sum(x.waits for x in xs) / max(1, len(xs)),
        )
    cost.print()
    note(
        f"{failures} failures served ({outcomes['429']} 429, {outcomes['stall']} stalls); "
        f"store writes {writes} ({writes / max(1, outcomes['429']):.2f} per 429), "
        f"conflicts {conflicts}, file versions seen by the poller {storm.file_versions} "
        f"(longest gap between its reads {storm.poll_gap * 1000:.0f} ms); "
        f"extra history events {extra_events:.0f} ({extra_events / max(1, failures):.1f} "
        f"per failure), extra store reads {extra_lists:.0f}"
    )

    figures.add("storm_sessions", float(n), "sessions")
    figures.add("storm_runs_completed", float(f.completed), f"of {n}")
    figures.add("storm_runs_completed_baseline", float(b.completed), f"of {n}")
    figures.add("storm_model_calls_per_completed_run", f.calls_per_completed, "calls")
    figures.add("storm_model_calls_per_completed_run_baseline", b.calls_per_completed, "calls")
    figures.add("storm_cooled_profile_requests", float(len(uses)), "requests")
    figures.add("storm_cooled_profile_decisions", float(len(stale)), "requests")
    figures.add("storm_time_to_result_p50", f.p50, "s")
    figures.add("storm_time_to_result_p99", f.p99, "s")
    figures.add("storm_baseline_time_to_result_p50", b.p50, "s")
    figures.add("storm_baseline_time_to_result_p99", b.p99, "s")
    figures.add("ratio_storm_vs_baseline_p50", f.p50 / b.p50 if b.p50 else math.nan, "x")
    figures.add("ratio_storm_vs_baseline_p99", f.p99 / b.p99 if b.p99 else math.nan, "x")
    figures.add("storm_429s_served", float(outcomes["429"]), "responses")
    figures.add("storm_stalls_served", float(outcomes["stall"]), "responses")
    figures.add("storm_store_writes_per_429", writes / max(1, outcomes["429"]), "writes")
    figures.add("storm_store_conflicts_per_429", conflicts / max(1, outcomes["429"]), "refusals")
    figures.add("storm_run_history_events_p50", median(events_s), "events")
    figures.add("storm_baseline_run_history_events_p50", median(events_b), "events")
    figures.add("storm_history_events_per_failure", extra_events / max(1, failures), "events")
    figures.print()

    missed = []
    if f.completed < n:
        missed.append(f"runs completed {f.completed}/{n} in the fault storm (target {n}/{n})")
    if b.completed < n:
        missed.append(f"runs completed {b.completed}/{n} with no faults")
    if stale:
        missed.append(f"{len(stale)} calls decided on a profile the store already had cooling")
    missed += problems
    total_s = time.monotonic() - wall_started
    if missed:
        print(f"\nTARGETS MISSED ({len(missed)}):")
        for m in missed:
            print(f"  {m}")
    else:
        print(f"\nall targets met: {n}/{n} completed, no call decided on a cooling profile")
    print(f"(whole benchmark {total_s:.0f} s)")
    sys.stdout.flush()
    return len(missed)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20 sessions: a smoke run")
    parser.add_argument("--seed", type=int, default=9, help="the fake server's chaos seed")
    parser.add_argument(
        "--retry-after",
        type=float,
        default=None,
        help="seconds the 429s announce in Retry-After (real providers send one; default none)",
    )
    args = parser.parse_args()
    quick = args.quick or os.environ.get("AGENTLANE_BENCH_QUICK") == "1"
    try:
        counts = QUICK if quick else FULL
        sys.exit(1 if asyncio.run(main(counts, args.seed, args.retry_after)) else 0)
    except KeyboardInterrupt:
        sys.exit(130)
