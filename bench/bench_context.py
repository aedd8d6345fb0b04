"""Context that never breaks (issue 10): a long session on a 32 000-token window, beside the same
workload on a model whose window never fills, measured in the same run.

    python bench/bench_context.py             (from the repository root, with the venv's Python)
    python bench/bench_context.py --quick     (60 turns, baseline 20: a smoke run)
    python bench/bench_context.py --turns 300 --baseline-turns 50
    python bench/bench_context.py --cpu       (no server: one request's context build, in CPU time)

One dev server, one worker process, the fake provider server (`tests/fakes/provider_server.py`,
its own process) as two Anthropic models: `anthropic/fake-small` with `context_window = 32000` in
the deployment's config.toml, the fake itself refusing any prompt over 32 000 tokens (as it
counts them) with Anthropic's real overflow error; and `anthropic/fake-large` with a window that
never fills (the baseline). Each turn is one user message, so one run: the scripted model reads
one of the workspace's data files (8-12 KB each), on every 10th turn also writes a new note
(`write`), then answers a short text. The first message states the task. Compaction's summariser
requests are answered by the fake's automatic summary, without taking any scripted chat reply.
What the engine does with the window (when it compacts, truncates, or is refused) is its own
decision, reported as it is.

`--cpu` measures one thing in-process instead: the CPU time (`time.process_time`) of building a
model request's context (`context_for_request`) from a session of 100, 1 000 and 5 000 entries,
built whole against built from the worker's cache after one 5-step run was appended (10 entries:
the message, four calls and their results, the reply). CPU time, not wall time: it holds on a
busy machine.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import math
import os
import random
import secrets
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

from activities.context.context_cache import ContextCache  # noqa: E402
from activities.context.request_context import context_for_request  # noqa: E402
from activities.context.tool_result_truncation import TRUNCATED_META_KEY  # noqa: E402
from agentlane.ids import events_workflow_id, session_workflow_id  # noqa: E402
from agentlane.run import ExecutionResult, ExecutionStatus  # noqa: E402
from agentlane.transcript import Role, ToolCall, TranscriptEntry  # noqa: E402
from bench.common import (  # noqa: E402
    Chain,
    Figures,
    Table,
    bench_stack,
    fresh_key,
    median,
    note,
    p95,
    stats_ms,
    workflow_chain,
)
from clients.api import AgentlaneClient  # noqa: E402
from tests.fakes.provider_server import FakeProviderClient, spawn  # noqa: E402
from tests.fakes.scripts import Reply, ScriptedToolCall  # noqa: E402
from tests.harness import Deployment  # noqa: E402

KEY = "sk-ant-api03-" + secrets.token_hex(24)
SMALL_ID = "fake-small"
LARGE_ID = "fake-large"
SMALL = f"anthropic/{SMALL_ID}"
LARGE = f"anthropic/{LARGE_ID}"
WINDOW = 32_000
# The baseline's window (config and fake alike): 100 turns of ~2 700 tokens never come near it.
LARGE_WINDOW = 2_000_000
DATA_FILES = 100  # distinct data files, read in turn (turn t reads file (t - 1) % 100)
FILE_MIN_BYTES = 8_000
FILE_MAX_BYTES = 12_000
WRITE_EVERY = 10  # every 10th turn also writes a note
BLOCK = 50  # turns per row of the saw-tooth table
# The fake keeps every request's body; its log is collected and cleared this often (turns) so
# a long session does not hold hundreds of MB in the fake's memory.
HARVEST_EVERY = 50
TURN_LIMIT_S = 300  # one turn's run must end within this
TASK = (
    "Task: audit the data files in data/ (part-000.txt to part-{last:03d}.txt): read them one "
    "at a time, report the row count and anything unusual, and every tenth turn write an audit "
    "note to notes/. Start with data/part-000.txt."
)


@dataclass(frozen=True)
class Counts:
    turns: int
    baseline_turns: int


FULL = Counts(1000, 100)
QUICK = Counts(60, 20)


# -- the workload ----------------------------------------------------------------------------


def data_path(turn: int) -> str:
    return f"data/part-{(turn - 1) % DATA_FILES:03d}.txt"


def note_path(turn: int) -> str:
    return f"notes/audit-{turn:04d}.txt"


def writes_on(turn: int) -> bool:
    return turn % WRITE_EVERY == 0


def message(turn: int) -> str:
    if turn == 1:
        return TASK.format(last=DATA_FILES - 1)
    return f"Turn {turn}: read {data_path(turn)} and report."


def answer(turn: int) -> str:
    wrote = f", note in {note_path(turn)}" if writes_on(turn) else ""
    return f"Turn {turn}: {data_path(turn)} checked, nothing unusual{wrote}."


def script(turn: int) -> list[Reply]:
    calls = [Reply(tool_calls=[ScriptedToolCall(name="read", arguments={"path": data_path(turn)})])]
    if writes_on(turn):
        content = f"audit note, turn {turn}: {data_path(turn)} checked, no anomalies.\n"
        calls.append(
            Reply(
                tool_calls=[
                    ScriptedToolCall(
                        name="write", arguments={"path": note_path(turn), "content": content}
                    )
                ]
            )
        )
    return [*calls, Reply(text=answer(turn))]


def make_workspace(root: Path) -> Path:
    """Data files of 8-12 KB (seeded sizes), CSV-like rows."""
    root.mkdir(parents=True)
    rng = random.Random(10)
    data = root / "data"
    data.mkdir()
    for i in range(DATA_FILES):
        want = rng.randint(FILE_MIN_BYTES, FILE_MAX_BYTES)
        rows: list[str] = ["row,sensor,taken_at,reading,status"]
        size = len(rows[0]) + 1
        n = 0
        while size < want:
            row = (
                f"{n:05d},sensor-{rng.randint(1, 64):02d},2026-03-{1 + n % 28:02d}T"
                f"{n % 24:02d}:{(n * 7) % 60:02d}:00Z,{rng.uniform(-20, 45):.3f},"
                f"{rng.choice(['ok', 'ok', 'ok', 'drift', 'gap'])}"
            )
            rows.append(row)
            size += len(row) + 1
            n += 1
        (data / f"part-{i:03d}.txt").write_text("\n".join(rows) + "\n")
    return root


# -- one session -----------------------------------------------------------------------------


@dataclass
class Turn:
    n: int
    run_id: str = ""
    t0: float = 0.0  # time.time() when send was called
    t1: float = 0.0  # time.time() when the run's result (and the session's record of it) came
    seconds: float = 0.0  # monotonic send -> result
    result: ExecutionResult | None = None
    chat_tokens: list[int] = field(default_factory=list)  # chat prompts, in arrival order
    summary_tokens: list[int] = field(default_factory=list)
    refused: int = 0
    compactions: int = 0  # markers written during the turn

    @property
    def compacted(self) -> bool:
        return self.compactions > 0


@dataclass
class Session:
    label: str
    key: str
    model: str
    workspace: Path
    turns: list[Turn] = field(default_factory=list)
    log: list[dict[str, Any]] = field(default_factory=list)  # the fake's log, all harvests
    problems: list[str] = field(default_factory=list)
    entries: list[TranscriptEntry] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def markers(self) -> list[TranscriptEntry]:
        return [e for e in self.entries if e.role == Role.COMPACTION]


def worker_lines(dep: Deployment, limit: int = 25) -> list[str]:
    """The worker log's warning/error lines (and compaction lines) of the last `limit`."""
    out: list[str] = []
    for w in dep.workers:
        for line in w.log.read_text(errors="replace").splitlines():
            low = line.lower()
            if any(word in low for word in ("warning", "error", "compaction", "not sent")):
                out.append(line[:400])
    return out[-limit:]


def harvest(fake: FakeProviderClient, session: Session, window: int) -> None:
    session.log.extend(fake.log())
    fake.reset()
    fake.context_window(window)


async def drive(
    client: AgentlaneClient,
    dep: Deployment,
    fake: FakeProviderClient,
    session: Session,
    turns: int,
    window: int,
) -> Session:
    """`turns` messages, one at a time, each waited for until its run's end."""
    fake.reset()
    fake.context_window(window)
    started = time.monotonic()
    for n in range(1, turns + 1):
        turn = Turn(n)
        session.turns.append(turn)
        await asyncio.to_thread(fake.script, *script(n), replace=True)
        turn.t0 = time.time()
        t = time.monotonic()
        problem = ""
        try:
            receipt = await client.send_and_start(
                session.key, message(n), workspace=str(session.workspace), model=session.model
            )
            turn.run_id = receipt.run_id or ""
            turn.result = await asyncio.wait_for(client.wait_for_run(turn.run_id), TURN_LIMIT_S)
        except Exception as err:  # reported, not hidden: the session stops here
            problem = f"{type(err).__name__}: {err}"
        turn.seconds = time.monotonic() - t
        turn.t1 = time.time()
        r = turn.result
        if r is not None and r.status != ExecutionStatus.SUCCESS:
            error = r.error
            problem = (
                f"run ended {r.status.value} / {r.termination_reason.value}: "
                f"{error.kind.value + ': ' + error.message if error else r.reply}"
            )
        elif r is not None and (r.reply != answer(n) or r.tool_calls != len(script(n)) - 1):
            problem = (
                f"unexpected reply {r.reply[:120]!r} after {r.tool_calls} tool calls "
                f"(scripted {answer(n)!r} after {len(script(n)) - 1})"
            )
        if problem:
            lines = "\n    ".join(worker_lines(dep))
            session.problems.append(
                f"{session.label} turn {n} (run {turn.run_id or '?'}): {problem}\n"
                f"  worker log (last warning/error/compaction lines):\n    {lines}"
            )
            break
        if n % HARVEST_EVERY == 0:
            await asyncio.to_thread(harvest, fake, session, window)
        if n % 100 == 0:
            note(
                f"  {session.label}: {n}/{turns} turns, {time.monotonic() - started:.0f} s, "
                f"last turn {turn.seconds * 1000:.0f} ms"
            )
    await asyncio.to_thread(harvest, fake, session, window)
    session.wall_s = time.monotonic() - started
    session.entries = await asyncio.to_thread(client.transcript, session.key)
    assign(session)
    return session


def assign(session: Session) -> None:
    """The fake's requests and the compaction markers, each to the turn it arrived in."""
    turns = session.turns
    starts = [t.t0 for t in turns]

    def turn_at(at: float) -> Turn | None:
        i = bisect.bisect_right(starts, at) - 1
        return turns[i] if i >= 0 and at <= turns[i].t1 else None

    for entry in sorted(session.log, key=lambda e: float(e["at"])):
        turn = turn_at(float(entry["at"]))
        if turn is None:
            continue
        if entry.get("outcome") == "overflow":
            turn.refused += 1
        tokens = int(entry.get("prompt_tokens") or 0)
        if entry.get("purpose") == "summary":
            turn.summary_tokens.append(tokens)
        else:
            turn.chat_tokens.append(tokens)
    for marker in session.markers:
        turn = turn_at(marker.ts)
        if turn is not None:
            turn.compactions += 1


def teeth(session: Session, count: int = 16) -> str:
    """The first turns' largest input, `*` where the turn compacted: the saw-tooth up close."""
    return " ".join(
        f"{max(t.chat_tokens, default=0)}{'*' if t.compacted else ''}"
        for t in session.turns[:count]
    )


# -- histories -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Size:
    events: int
    bytes: int


@dataclass
class ChainSizes:
    runs: int  # continue-as-new runs in the chain
    peak: Size  # the largest single run
    final: Size  # the latest run
    total: Size  # the whole chain


def sizes(chain: Chain) -> ChainSizes:
    from bench.common import history_bytes

    each = [Size(len(h.events), history_bytes(h)) for h in chain.runs]
    return ChainSizes(
        runs=len(each),
        peak=Size(max(s.events for s in each), max(s.bytes for s in each)),
        final=each[-1],
        total=Size(sum(s.events for s in each), sum(s.bytes for s in each)),
    )


async def history_sizes(
    client: AgentlaneClient, session: Session
) -> tuple[ChainSizes, ChainSizes, list[ChainSizes]]:
    """The session workflow's chain, its events workflow's chain, and every run workflow's."""
    raw = client.client
    gate = asyncio.Semaphore(8)

    async def one(workflow_id: str) -> ChainSizes:
        async with gate:
            return sizes(await workflow_chain(raw, workflow_id))

    session_chain = await one(session_workflow_id(session.key))
    events_chain = await one(events_workflow_id(session.key))
    runs = await asyncio.gather(*(one(t.run_id) for t in session.turns if t.run_id))
    return session_chain, events_chain, list(runs)


# -- the figures -----------------------------------------------------------------------------


def pct_ms(values: Sequence[float]) -> tuple[float, float]:
    return stats_ms(values) if values else (math.nan, math.nan)


def files_before_cut(session: Session, marker: TranscriptEntry) -> tuple[list[str], list[str]]:
    """(the notes the bench had written before `marker`'s cut, those its progress record
    lists as modified). The cut is the marker's first kept entry: every entry before it (in the
    transcript, earlier markers aside) was summarised by this compaction or an earlier one."""
    entries = session.entries
    index = {e.id: i for i, e in enumerate(entries)}
    cut = index.get(str(marker.meta.get("first_kept_id") or ""), index[marker.id])
    calls: dict[str, str] = {}  # write call id -> path
    written: list[str] = []
    for e in entries[:cut]:
        for call in e.tool_calls:
            path = call.arguments.get("path")
            if call.name == "write" and isinstance(path, str):
                calls[call.id] = path
        if e.role == Role.TOOL and not e.is_error and e.tool_call_id in calls:
            written.append(calls[e.tool_call_id])  # a write that succeeded
    wrote_bench = {note_path(t.n) for t in session.turns if writes_on(t.n)}
    expected = [p for p in written if p in wrote_bench]
    progress = marker.meta.get("progress") or {}
    listed = list(progress.get("files_modified") or [])
    return expected, listed


def blocks_table(session: Session) -> Table:
    table = Table(
        f"{session.label}: model-call input tokens as the provider counted them, per {BLOCK} "
        "turns (the saw-tooth)",
        [
            "turns",
            "chat calls",
            "input min",
            "input max",
            "compactions",
            "summariser calls",
            "summariser input max",
            "refused",
            "turn ms median",
            "turn ms max",
        ],
    )
    turns = session.turns
    for start in range(0, len(turns), BLOCK):
        block = turns[start : start + BLOCK]
        chat = [x for t in block for x in t.chat_tokens]
        summ = [x for t in block for x in t.summary_tokens]
        table.add(
            f"{block[0].n}-{block[-1].n}",
            len(chat),
            min(chat, default=0),
            max(chat, default=0),
            sum(t.compactions for t in block),
            len(summ),
            max(summ, default=0),
            sum(t.refused for t in block),
            median([t.seconds for t in block]) * 1000,
            max(t.seconds for t in block) * 1000,
        )
    return table


def write_config(dep: Deployment, fake_url: str) -> None:
    (dep.data_dir / "config.toml").write_text(
        f"""
[[models]]
provider = "anthropic"
id = "{SMALL_ID}"
api = "anthropic"
base_url = "{fake_url}"
context_window = {WINDOW}

[[models]]
provider = "anthropic"
id = "{LARGE_ID}"
api = "anthropic"
base_url = "{fake_url}"
context_window = {LARGE_WINDOW}
"""
    )


def check_worker(dep: Deployment) -> str:
    for w in dep.workers:
        code = w.proc.poll()
        if code is not None:
            tail = w.log.read_text(errors="replace").splitlines()[-5:]
            return f"worker pid {w.pid} exited with code {code}; log ends: {tail}"
    return ""


async def main(counts: Counts) -> int:
    for name in list(os.environ):
        if name in ("ANTHROPIC_API_KEY", "AGENTLANE_CONFIG") or name.startswith("AGENTLANE_KEY_"):
            del os.environ[name]
    wall_started = time.monotonic()
    figures = Figures()
    problems: list[str] = []
    async with bench_stack("bench-context") as stack:
        proc, fake_url = spawn(extra_args=["--anthropic-key", KEY])
        stack.processes.append(proc)
        fake = FakeProviderClient(fake_url, timeout=60)
        dep = stack.deployment(ANTHROPIC_API_KEY=KEY, AGENTLANE_LOG_LEVEL="INFO")
        write_config(dep, fake_url)
        dep.start_worker()
        client = await stack.client(dep)
        note(
            f"dev server {stack.server.address}; one worker process; fake provider {fake_url}; "
            f"{counts.turns} turns on {SMALL} (window {WINDOW}), baseline {counts.baseline_turns}"
            f" turns on {LARGE} (window {LARGE_WINDOW}); data files {FILE_MIN_BYTES}-"
            f"{FILE_MAX_BYTES} B; started {time.strftime('%H:%M:%S')}"
        )
        ws_root = dep.data_dir / "ws"
        # Warm-up: the worker's first workflows and SDK imports belong to neither session.
        warm = Session("warm-up", fresh_key("warm"), SMALL, make_workspace(ws_root / "warm"))
        await drive(client, dep, fake, warm, 2, WINDOW)
        problems += warm.problems

        base = Session("baseline", fresh_key("base"), LARGE, make_workspace(ws_root / "base"))
        note(f"baseline: {counts.baseline_turns} turns on {LARGE} ...")
        await drive(client, dep, fake, base, counts.baseline_turns, LARGE_WINDOW)
        note(f"baseline done in {base.wall_s:.0f} s")
        problems += base.problems

        main_s = Session("32k window", fresh_key("ctx"), SMALL, make_workspace(ws_root / "ctx"))
        note(f"32k window: {counts.turns} turns on {SMALL} ...")
        await drive(client, dep, fake, main_s, counts.turns, WINDOW)
        note(f"32k window done in {main_s.wall_s:.0f} s")
        problems += main_s.problems
        if gone := check_worker(dep):
            problems.append(gone)
        hist_started = time.monotonic()
        main_hist = await history_sizes(client, main_s)
        base_hist = await history_sizes(client, base)
        note(f"histories read in {time.monotonic() - hist_started:.0f} s")

    # -- report --------------------------------------------------------------------------
    s, b = main_s, base
    n = len(s.turns)
    nb = len(b.turns)
    blocks_table(s).print()
    note(f"first turns, largest input each (* = the turn compacted): {teeth(s)}")
    blocks_table(b).print()
    note(f"first turns, largest input each: {teeth(b)}")

    markers = s.markers
    compactions = len(markers)
    chat_all = [x for t in s.turns for x in t.chat_tokens]
    summ_all = [x for t in s.turns for x in t.summary_tokens]
    outcomes = Counter(str(e.get("outcome")) for e in s.log)
    refused = outcomes["overflow"]
    truncated = [
        e for e in s.entries if e.role == Role.TOOL and TRUNCATED_META_KEY in (e.meta or {})
    ]
    durations = [float(m.meta.get("duration_ms") or 0) / 1000 for m in markers]
    comp_med, comp_p95 = pct_ms(durations)
    plain = [t.seconds for t in s.turns if not t.compacted]
    compacting = [t.seconds for t in s.turns if t.compacted]
    plain_med, plain_p95 = pct_ms(plain)
    cmp_med, cmp_p95 = pct_ms(compacting)
    base_med, base_p95 = pct_ms([t.seconds for t in b.turns])
    first_b = s.turns[:nb]
    first_med, first_p95 = pct_ms([t.seconds for t in first_b])
    all_med, all_p95 = pct_ms([t.seconds for t in s.turns])
    base_chat = [x for t in b.turns for x in t.chat_tokens]
    base_sent = sum(base_chat)
    main_sent_b = sum(x for t in first_b for x in [*t.chat_tokens, *t.summary_tokens])
    base_slope = (
        (max(b.turns[-1].chat_tokens) - max(b.turns[0].chat_tokens)) / (nb - 1)
        if nb > 1 and b.turns[-1].chat_tokens and b.turns[0].chat_tokens
        else math.nan
    )
    before_after = [
        (float(m.meta.get("tokens_before") or 0), float(m.meta.get("tokens_after") or 0))
        for m in markers
    ]
    triggers = Counter(str(m.meta.get("trigger")) for m in markers)

    table = Table(
        "the two sessions",
        [
            "",
            "turns",
            "compactions",
            "input max",
            "input at last turn",
            "refused",
            "turn ms median",
            "p95",
            "wall s",
        ],
    )
    for label, x in ((f"32k window ({SMALL})", s), (f"baseline ({LARGE})", b)):
        last = x.turns[-1].chat_tokens if x.turns else []
        table.add(
            label,
            len(x.turns),
            len(x.markers),
            max([y for t in x.turns for y in t.chat_tokens], default=0),
            max(last, default=0),
            Counter(str(e.get("outcome")) for e in x.log)["overflow"],
            median([t.seconds for t in x.turns]) * 1000,
            p95([t.seconds for t in x.turns]) * 1000,
            x.wall_s,
        )
    table.add(
        f"32k window, first {nb} turns",
        nb,
        sum(t.compactions for t in first_b),
        max([y for t in first_b for y in t.chat_tokens], default=0),
        max(first_b[-1].chat_tokens if first_b else [], default=0),
        sum(t.refused for t in first_b),
        first_med,
        first_p95,
        "",
    )
    table.print()

    lat = Table(
        "32k window: per-turn latency (send -> run result), ms",
        ["turns", "count", "median", "p95"],
    )
    lat.add("without a compaction", len(plain), plain_med, plain_p95)
    lat.add("with a compaction", len(compacting), cmp_med, cmp_p95)
    lat.add("all", n, all_med, all_p95)
    lat.add(f"baseline ({LARGE}, {nb} turns)", nb, base_med, base_p95)
    lat.print()

    comp = Table(
        "32k window: compactions",
        ["", "value"],
    )
    comp.add("compactions", compactions)
    comp.add(
        "turns with one / with more",
        f"{sum(t.compactions == 1 for t in s.turns)} / {sum(t.compactions > 1 for t in s.turns)}",
    )
    comp.add("triggers", dict(triggers))
    comp.add("activity duration_ms median / p95", f"{comp_med:.0f} / {comp_p95:.0f}")
    comp.add(
        "summariser calls (per compaction)",
        f"{len(summ_all)} ({len(summ_all) / compactions:.2f})" if compactions else len(summ_all),
    )
    comp.add(
        "tokens_before -> tokens_after median (engine estimate)",
        f"{median([x for x, _ in before_after]):.0f} -> {median([y for _, y in before_after]):.0f}"
        if before_after
        else "n/a",
    )
    comp.add("tool results truncated in the store", len(truncated))
    comp.add("fake provider outcomes", dict(outcomes))
    comp.print()

    hist = Table(
        "workflow histories (events / bytes)",
        ["workflow", "chain runs", "peak run", "final run", "whole chain"],
    )

    def fmt(size: Size) -> str:
        return f"{size.events} / {size.bytes}"

    for label, (sess, evts, runs) in (("32k window", main_hist), ("baseline", base_hist)):
        hist.add(f"{label}: session", sess.runs, fmt(sess.peak), fmt(sess.final), fmt(sess.total))
        hist.add(f"{label}: events", evts.runs, fmt(evts.peak), fmt(evts.final), fmt(evts.total))
        if runs:
            hist.add(
                f"{label}: run workflows (max over {len(runs)})",
                max(r.runs for r in runs),
                fmt(Size(max(r.peak.events for r in runs), max(r.peak.bytes for r in runs))),
                fmt(Size(max(r.final.events for r in runs), max(r.final.bytes for r in runs))),
                fmt(Size(max(r.total.events for r in runs), max(r.total.bytes for r in runs))),
            )
    hist.print()

    task_kept = False
    missing: list[str] = []
    expected: list[str] = []
    if markers:
        last = markers[-1]
        progress = last.meta.get("progress") or {}
        task_kept = str(progress.get("task", "")).startswith(message(1))
        expected, listed = files_before_cut(s, last)
        missing = [p for p in expected if p not in listed]
        shown_missing = ": " + ", ".join(missing[:10]) if missing else ""
        note(
            f"\nlatest compaction ({last.id}, turn "
            f"{next((t.n for t in s.turns if t.t0 <= last.ts <= t.t1), '?')}): task kept "
            f"{'yes' if task_kept else 'NO'} ({str(progress.get('task', ''))[:70]!r}...); "
            f"notes written before its cut {len(expected)}, listed as modified "
            f"{len(listed)}, missing {len(missing)}{shown_missing};"
            f" files read listed {len(progress.get('files_read') or [])}"
        )

    per = n / compactions if compactions else math.nan
    figures.add("context_turns", float(n), "turns")
    figures.add("context_window", float(WINDOW), "tokens")
    figures.add("context_compactions", float(compactions), "compactions")
    figures.add("context_turns_per_compaction", per, "turns")
    figures.add("context_input_tokens_max", float(max(chat_all, default=0)), "tokens")
    figures.add("context_summariser_input_tokens_max", float(max(summ_all, default=0)), "tokens")
    figures.add("context_provider_refusals", float(refused), "requests")
    figures.add("context_tool_results_truncated", float(len(truncated)), "results")
    sess, evts, runs = main_hist
    figures.add("context_session_history_events_peak", float(sess.peak.events), "events")
    figures.add("context_session_history_bytes_peak", float(sess.peak.bytes), "B")
    figures.add("context_session_history_events_final", float(sess.final.events), "events")
    figures.add("context_session_history_bytes_final", float(sess.final.bytes), "B")
    figures.add("context_session_chain_runs", float(sess.runs), "runs")
    figures.add("context_session_chain_events", float(sess.total.events), "events")
    figures.add("context_session_chain_bytes", float(sess.total.bytes), "B")
    figures.add("context_events_history_bytes_peak", float(evts.peak.bytes), "B")
    if runs:
        figures.add(
            "context_run_history_events_peak_max", float(max(r.peak.events for r in runs)), "events"
        )
        figures.add(
            "context_run_history_bytes_peak_max", float(max(r.peak.bytes for r in runs)), "B"
        )
        figures.add(
            "context_run_history_events_final_max",
            float(max(r.final.events for r in runs)),
            "events",
        )
        figures.add(
            "context_run_history_bytes_final_max", float(max(r.final.bytes for r in runs)), "B"
        )
    figures.add("context_compaction_ms_median", comp_med, "ms")
    figures.add("context_compaction_ms_p95", comp_p95, "ms")
    figures.add("context_turn_ms_median", plain_med, "ms")
    figures.add("context_turn_ms_p95", plain_p95, "ms")
    figures.add("context_turn_compacting_ms_median", cmp_med, "ms")
    figures.add("context_turn_compacting_ms_p95", cmp_p95, "ms")
    figures.add("context_progress_task_kept", 1.0 if task_kept else 0.0, "(1 = yes)")
    figures.add("context_progress_files_expected", float(len(expected)), "files")
    figures.add("context_progress_files_missing", float(len(missing)), "files")
    figures.add("context_baseline_turns", float(nb), "turns")
    figures.add("context_baseline_turn_ms_median", base_med, "ms")
    figures.add("context_baseline_turn_ms_p95", base_p95, "ms")
    figures.add("context_first_turns_ms_median", first_med, "ms")
    figures.add("context_first_turns_ms_p95", first_p95, "ms")
    figures.add(
        "ratio_first_turns_vs_baseline_median",
        first_med / base_med if base_med else math.nan,
        "x",
    )
    figures.add("context_baseline_input_tokens_max", float(max(base_chat, default=0)), "tokens")
    figures.add("context_baseline_input_tokens_per_turn", base_slope, "tokens")
    figures.add(
        f"context_baseline_input_tokens_at_{n}_extrapolated",
        max(base_chat, default=0) + base_slope * (n - nb),
        "tokens",
    )
    figures.add("context_first_turns_input_tokens_sent", float(main_sent_b), "tokens")
    figures.add("context_baseline_input_tokens_sent", float(base_sent), "tokens")
    figures.add(
        "ratio_input_tokens_sent_vs_baseline",
        main_sent_b / base_sent if base_sent else math.nan,
        "x",
    )
    figures.print()

    missed: list[str] = list(problems)
    if refused:
        missed.append(f"{refused} requests refused by the provider (overflow)")
    if max(chat_all, default=0) > WINDOW:
        missed.append(f"an input of {max(chat_all)} tokens crossed the {WINDOW}-token window")
    if n >= 20 and not compactions:
        missed.append("no compaction happened")
    if markers and not task_kept:
        missed.append("the latest progress record lost the task")
    if missing:
        missed.append(f"{len(missing)} modified files missing from the latest progress record")
    total_s = time.monotonic() - wall_started
    if missed:
        print(f"\nPROBLEMS ({len(missed)}):")
        for m in missed:
            print(f"  {m}")
    print(f"(whole benchmark {total_s:.0f} s)")
    sys.stdout.flush()
    return len(missed)


# -- --cpu: one request's context build ------------------------------------------------------

CPU_SIZES = (100, 1_000, 5_000)
CPU_REQUESTS = 60  # timed requests per size and way


def run_entries(run: int) -> list[TranscriptEntry]:
    """One 5-step run as the transcript holds it: read, write, exec, read, then the reply."""
    run_id = f"run-{run}"
    out = [
        TranscriptEntry(id=f"{run_id}:u", role=Role.USER, ts=0, run_id=run_id, text=message(run))
    ]
    for step, (tool, args) in enumerate(
        [
            ("read", {"path": data_path(run)}),
            ("write", {"path": note_path(run), "content": "audit note " * 30}),
            ("exec", {"command": "true"}),
            ("read", {"path": note_path(run)}),
        ]
    ):
        call = ToolCall(id=f"{run_id}:c{step}", name=tool, arguments=args)
        out.append(
            TranscriptEntry(
                id=f"{run_id}:a{step}", role=Role.ASSISTANT, ts=0, run_id=run_id, tool_calls=[call]
            )
        )
        out.append(
            TranscriptEntry(
                id=f"{call.id}:result",
                role=Role.TOOL,
                ts=0,
                run_id=run_id,
                tool_call_id=call.id,
                tool_name=tool,
                text="row,value\n" * (40 if tool == "read" else 2),
            )
        )
    out.append(
        TranscriptEntry(
            id=f"{run_id}:a", role=Role.ASSISTANT, ts=0, run_id=run_id, text=answer(run)
        )
    )
    return out


def cpu_ms(build: Callable[[], object]) -> float:
    start = time.process_time()
    build()
    return (time.process_time() - start) * 1000


def cpu_bench() -> int:
    table = Table(
        "Building one request's context, CPU ms (median of "
        f"{CPU_REQUESTS} requests; incremental: after one 5-step run appended)",
        ["entries", "whole", "incremental", "whole / incremental"],
    )
    figures = Figures()
    window = 200_000
    for size in CPU_SIZES:
        stored: list[TranscriptEntry] = []
        run = 0
        while len(stored) < size:
            run += 1
            stored.extend(run_entries(run))
        stored = stored[:size]
        whole = [cpu_ms(partial(context_for_request, stored, window)) for _ in range(CPU_REQUESTS)]
        # Each timed request: the cache holds the session up to its last run, then that run's
        # 10 entries are appended (the size stays the one in the table).
        before = stored[: size - len(run_entries(0))]
        incremental: list[float] = []
        for _ in range(CPU_REQUESTS):
            cache = ContextCache()
            context_for_request(before, window, cache, "bench")
            build = partial(context_for_request, stored, window, cache, "bench")
            incremental.append(cpu_ms(build))
            if cache.incremental != 1:
                print(f"PROBLEM: the request of {size} entries was built whole")
                return 1
            if build() != context_for_request(stored, window):
                print(f"PROBLEM: the cached context of {size} entries differs")
                return 1
        w, i = median(whole), median(incremental)
        table.add(size, w, i, f"{w / i:.1f}x")
        figures.add(f"context_whole_ms_{size}", w, "ms")
        figures.add(f"context_incremental_ms_{size}", i, "ms")
    table.print()
    figures.print()
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="60 turns, baseline 20: smoke run")
    parser.add_argument("--turns", type=int, default=None, help="turns on the 32k window")
    parser.add_argument("--baseline-turns", type=int, default=None, help="baseline turns")
    parser.add_argument("--cpu", action="store_true", help="only the context build's CPU time")
    args = parser.parse_args()
    if args.cpu:
        sys.exit(cpu_bench())
    quick = args.quick or os.environ.get("AGENTLANE_BENCH_QUICK") == "1"
    counts = QUICK if quick else FULL
    counts = Counts(
        args.turns or counts.turns,
        min(args.baseline_turns or counts.baseline_turns, args.turns or counts.turns),
    )
    try:
        sys.exit(1 if asyncio.run(main(counts)) else 0)
    except KeyboardInterrupt:
        sys.exit(130)
