"""Throughput with more worker processes, on the embedded store and on PostgreSQL (issue 20),
and the store's own latency.

    python bench/bench_hosts.py [--quick] [--parts abc] [--backends embedded,postgresql]
                                                (from the repository root, with the venv's Python)

(a) Runs completed per second and steps per second with 1, 2 and 3 worker processes on one
    task queue: S sessions at once, one message each of K steps (`write fN.txt with x`, the
    offline model at zero latency: a step is one model call plus one file tool). On the
    embedded store the workers share one data dir (several processes of one host: SQLite's
    file lock); on PostgreSQL each worker has its own data dir, as separate hosts would. Each
    configuration runs a warm-up session first (worker start, first workflow tasks), then the
    timed burst.
(b) Store latency, measured in this process on the same machine: one append of one transcript
    entry (a transaction), one cooldown read (the shared usage row of a profile), one cooldown
    write (the compare-and-set), p50 and p99. The embedded store writes with synchronous=FULL;
    PostgreSQL runs with fsync on (a throw-away server from `tests/postgres_cluster.py`,
    loopback TCP), so each commit is durable on both.
(c) Many sessions active at once, one worker: `--many` sessions (500) are opened (one short
    run each; each session workflow then stays open, waiting for its next message, its
    transcript and records in the store), then 40 of them, spread over the 500, each run a
    K-step message, 4 at a time. A step's overhead is, as in bench_engine, one model call's
    scheduling to the next one's, with the offline model at zero latency: all of it is the
    engine and the store. p50 / p99 per backend, and PostgreSQL's p99 against the embedded
    store's.

The tables depend on what else the machine runs: figures from one run compare with each
other, not with another machine's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

from activities.queue_peers import CHECK_SECONDS as PEER_CHECK_SECONDS  # noqa: E402
from agentlane.run import ExecutionStatus  # noqa: E402
from agentlane.settings import Settings  # noqa: E402
from agentlane.transcript import Role, TranscriptEntry  # noqa: E402
from bench.bench_engine import engine_steps  # noqa: E402
from bench.common import (  # noqa: E402
    Figures,
    Stack,
    Table,
    bench_stack,
    median,
    note,
    settings_for,
    workflow_chain,
)
from clients.api import AgentlaneClient  # noqa: E402
from store.interface import Store  # noqa: E402
from store.open import open_store  # noqa: E402
from tests.harness import Deployment  # noqa: E402
from tests.postgres_cluster import PostgresCluster, unavailable_reason  # noqa: E402

# (c): how many of the open sessions run a message while the others stay open, how many at once.
PROBES = 40
PROBE_AT_ONCE = 4


def p99(values: list[float]) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return float(ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)])


def instruction(steps: int) -> str:
    return " then ".join(f"write f{i}.txt with x" for i in range(steps))


def start_workers(group: list[Deployment]) -> None:
    with ThreadPoolExecutor(len(group)) as pool:
        list(pool.map(lambda dep: dep.start_worker(120), group))


def make_group(stack: Stack, backend: str, workers: int, url: str | None) -> list[Deployment]:
    """`workers` worker processes on one task queue: one shared data dir on the embedded
    store (one host), one data dir each on PostgreSQL (one host each)."""
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    shared = stack.root / queue
    group = []
    for n in range(workers):
        data = shared if backend == "embedded" else stack.root / f"{queue}-host{n}"
        data.mkdir(parents=True, exist_ok=True)
        env = {"AGENTLANE_WORKSPACES": "shared"}
        if url:
            env.update(AGENTLANE_DATABASE_URL=url, AGENTLANE_HOST_ID=f"host{n}")
        dep = Deployment(data_dir=data, server=stack.server, task_queue=queue, extra_env=env)
        stack.deployments.append(dep)
        group.append(dep)
    return group


async def burst(client: AgentlaneClient, root: Path, sessions: int, steps: int) -> float:
    """S sessions at once, one K-step message each; the wall time until all have ended."""
    tag = uuid.uuid4().hex[:6]
    keys = [f"h-{tag}-{n}" for n in range(sessions)]
    for key in keys:
        (root / key).mkdir(parents=True)
    started = time.monotonic()
    receipts = await asyncio.gather(
        *(client.send_and_start(k, instruction(steps), workspace=str(root / k)) for k in keys)
    )
    results = await asyncio.gather(*(client.wait_for_run(r.run_id or "") for r in receipts))
    elapsed = time.monotonic() - started
    bad = [r for r in results if r.status != ExecutionStatus.SUCCESS]
    if bad:
        raise RuntimeError(f"{len(bad)} runs did not succeed: {bad[0].error}")
    for key in keys[:3]:
        written = [e for e in client.transcript(key) if e.role == Role.TOOL]
        if len(written) != steps:
            raise RuntimeError(f"{key}: {len(written)} tool results, expected {steps}")
    return elapsed


async def throughput(
    stack: Stack, backend: str, url: str | None, workers: int, sessions: int, steps: int
) -> tuple[float, float]:
    group = make_group(stack, backend, workers, url)
    await asyncio.to_thread(start_workers, group)
    try:
        client = await AgentlaneClient.connect(settings_for(group[0]))
        ws = stack.root / f"ws-{uuid.uuid4().hex[:6]}"
        await burst(client, ws, 1, 2)  # warm-up
        if workers > 1:
            # Long-running workers know of each other (activities/queue_peers.py asks every
            # CHECK_SECONDS); the timed burst is of that steady state.
            await asyncio.sleep(PEER_CHECK_SECONDS + 1)
        elapsed = await burst(client, ws, sessions, steps)
    finally:
        for dep in group:
            dep.stop_workers()
    return sessions / elapsed, sessions * steps / elapsed


def entry(n: int) -> TranscriptEntry:
    return TranscriptEntry(id=f"e{n}", role=Role.USER, ts=time.time(), text=f"entry {n} " * 20)


async def store_latency(store: Store, rounds: int) -> dict[str, list[float]]:
    key = f"lat-{uuid.uuid4().hex[:6]}"
    profile = f"bench:{uuid.uuid4().hex[:6]}"
    out: dict[str, list[float]] = {"append": [], "cooldown_read": [], "cooldown_write": []}
    await store.set_usage(profile, None, json.dumps({"last_used": time.time()}))
    for n in range(rounds):
        t = time.perf_counter()
        await store.append_entries(key, [entry(n)])
        out["append"].append(time.perf_counter() - t)
        t = time.perf_counter()
        row = await store.usage_row(profile)
        out["cooldown_read"].append(time.perf_counter() - t)
        assert row is not None
        usage = json.dumps({"last_used": time.time(), "cooldown_until": time.time() + 60})
        t = time.perf_counter()
        if not await store.set_usage(profile, row.version, usage):
            raise RuntimeError("compare-and-set lost with no other writer")
        out["cooldown_write"].append(time.perf_counter() - t)
    return out


async def many_sessions(
    stack: Stack, backend: str, url: str | None, sessions: int, probes: int, steps: int
) -> list[float]:
    """Step times (s) of `probes` sessions running `steps` steps each, `PROBE_AT_ONCE` at a
    time, while `sessions` sessions are open."""
    (dep,) = make_group(stack, backend, 1, url)
    await asyncio.to_thread(dep.start_worker, 120)
    try:
        client = await AgentlaneClient.connect(settings_for(dep))
        ws = stack.root / f"many-{backend}-{uuid.uuid4().hex[:6]}"
        await burst(client, ws, 1, 2)  # warm-up
        tag = uuid.uuid4().hex[:6]
        keys = [f"m-{tag}-{n}" for n in range(sessions)]
        started = time.monotonic()
        for chunk in range(0, sessions, 100):
            receipts = await asyncio.gather(
                *(client.send_and_start(k, "say open") for k in keys[chunk : chunk + 100])
            )
            await asyncio.gather(*(client.wait_for_run(r.run_id or "") for r in receipts))
        note(f"  {backend}: {sessions} sessions open in {time.monotonic() - started:.0f} s")
        times: list[float] = []
        gate = asyncio.Semaphore(PROBE_AT_ONCE)

        async def probe(key: str) -> None:
            async with gate:
                (ws / key).mkdir(parents=True)
                receipt = await client.send_and_start(
                    key, instruction(steps), workspace=str(ws / key)
                )
                result = await client.wait_for_run(receipt.run_id or "")
                if result.status != ExecutionStatus.SUCCESS or result.tool_calls != steps:
                    raise RuntimeError(f"probe {key}: {result.status} {result.error}")
                chain = await workflow_chain(client.client, receipt.run_id or "")
                times.extend(engine_steps(chain).total)

        # Probes among the open sessions, spread over them (the oldest are the coldest).
        await asyncio.gather(*(probe(k) for k in keys[:: max(1, sessions // probes)][:probes]))
        return times
    finally:
        dep.stop_workers()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run that checks the script")
    parser.add_argument("--parts", default="abc", help="which parts to run (default abc)")
    parser.add_argument(
        "--backends", default="embedded,postgresql", help="comma-separated (default both)"
    )
    parser.add_argument("--many", type=int, default=500, help="(c): open sessions (default 500)")
    args = parser.parse_args()
    quick = args.quick or bool(__import__("os").environ.get("AGENTLANE_BENCH_QUICK"))
    sessions, steps, rounds = (4, 2, 50) if quick else (20, 5, 500)
    counts = [1, 2] if quick else [1, 2, 3]
    many, probes = (20, 4) if quick else (args.many, PROBES)
    wanted = args.backends.split(",")
    reason = unavailable_reason() if "postgresql" in wanted else "not asked for"
    if reason:
        note(f"PostgreSQL unavailable ({reason}): the embedded store only")
    figures = Figures()
    cluster = None if reason else PostgresCluster.create(fsync=True)
    try:
        async with bench_stack("hosts") as stack:
            backends: list[tuple[str, str | None]] = []
            if "embedded" in wanted:
                backends.append(("embedded", None))
            if cluster is not None:
                backends.append(("postgresql", cluster.create_database("bench")))

            if "a" in args.parts:
                await part_a(stack, backends, figures, counts, sessions, steps)
            if "b" in args.parts:
                await part_b(stack, backends, figures, rounds)
            if "c" in args.parts:
                await part_c(stack, backends, figures, many, probes, steps)
    finally:
        if cluster is not None:
            cluster.destroy()
    figures.print()


async def part_a(
    stack: Stack,
    backends: list[tuple[str, str | None]],
    figures: Figures,
    counts: list[int],
    sessions: int,
    steps: int,
) -> None:
    table = Table(
        f"(a) {sessions} sessions x {steps} steps at once, offline model",
        ["store", "workers", "runs/s", "steps/s"],
    )
    for backend, url in backends:
        for workers in counts:
            runs_s, steps_s = await throughput(stack, backend, url, workers, sessions, steps)
            table.add(backend, workers, runs_s, steps_s)
            figures.add(f"hosts_{backend}_{workers}w_runs_per_s", runs_s, "runs/s")
            figures.add(f"hosts_{backend}_{workers}w_steps_per_s", steps_s, "steps/s")
            note(f"  {backend}, {workers} worker(s): {steps_s:.1f} steps/s")
    table.print()


async def part_b(
    stack: Stack, backends: list[tuple[str, str | None]], figures: Figures, rounds: int
) -> None:
    lat = Table(
        f"(b) store latency, {rounds} sequential operations (ms)",
        ["store", "append p50", "append p99", "read p50", "read p99", "cas p50", "cas p99"],
    )
    for backend, url in backends:
        settings = Settings(data_dir=stack.root / f"latency-{backend}", database_url=url)
        store = await open_store(settings)
        try:
            got = await store_latency(store, rounds)
        finally:
            await store.close()
        row: list[object] = [backend]
        for op in ("append", "cooldown_read", "cooldown_write"):
            p50_ms, p99_ms = median(got[op]) * 1000, p99(got[op]) * 1000
            row += [p50_ms, p99_ms]
            figures.add(f"store_{backend}_{op}_p50", p50_ms, "ms")
            figures.add(f"store_{backend}_{op}_p99", p99_ms, "ms")
        lat.add(*row)
    lat.print()


async def part_c(
    stack: Stack,
    backends: list[tuple[str, str | None]],
    figures: Figures,
    many: int,
    probes: int,
    steps: int,
) -> None:
    table = Table(
        f"(c) {many} sessions open; {probes} of them run {steps} steps, {PROBE_AT_ONCE} at a "
        "time; one worker (ms)",
        ["store", "steps", "step p50", "step p99"],
    )
    p99s: dict[str, float] = {}
    for backend, url in backends:
        got = await many_sessions(stack, backend, url, many, probes, steps)
        p50_ms, p99s[backend] = median(got) * 1000, p99(got) * 1000
        table.add(backend, len(got), p50_ms, p99s[backend])
        figures.add(f"many_{backend}_step_p50", p50_ms, "ms")
        figures.add(f"many_{backend}_step_p99", p99s[backend], "ms")
    table.print()
    if len(p99s) == 2:
        extra = p99s["postgresql"] - p99s["embedded"]
        note(f"PostgreSQL's p99 step against the embedded store's: {extra:+.1f} ms")
        figures.add("many_postgresql_minus_embedded_step_p99", extra, "ms")


if __name__ == "__main__":
    asyncio.run(main())
