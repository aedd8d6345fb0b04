"""Store latency per operation, per backend: append one entry, read what is new, read a whole
transcript, read one profile's cooldown, compare-and-set it (p50 / p99, ms).

    python bench/bench_store.py                       (embedded SQLite in a temporary folder)
    AGENTLANE_DATABASE_URL=postgresql://… python bench/bench_store.py   (that one too)

`--files DIR` also measures the file store of an older checkout at DIR (a `git archive` of a
commit before the store existed): how the embedded default was chosen (README "Where state
lives").

Offloaded payloads (200 KB, what a long message or tool output is when it crosses a workflow
boundary): stored and read back through each backend, and through the files the embedded
default used before (`LocalFileStorageDriver`: one file per payload under its owner's folder,
written atomically, not fsync'd), how payloads came to be in the embedded store too.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable as a plain script

from agentlane.data_converter import LocalFileStorageDriver  # noqa: E402
from agentlane.settings import Settings  # noqa: E402
from agentlane.transcript import Role, TranscriptEntry  # noqa: E402
from bench.common import Table  # noqa: E402
from store.interface import Store  # noqa: E402
from store.models import PayloadOwnerRef  # noqa: E402
from store.open import open_store  # noqa: E402

N = 500
PAYLOADS = 100
PAYLOAD_BYTES = 200 * 1024


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def entry(i: int) -> TranscriptEntry:
    return TranscriptEntry(id=f"e{i}", role=Role.ASSISTANT, ts=time.time(), text="x" * 400)


async def timed(n: int, op: Callable[[int], Awaitable[Any]]) -> list[float]:
    times = []
    for i in range(n):
        started = time.perf_counter()
        await op(i)
        times.append(time.perf_counter() - started)
    return times


async def measure_store(store: Store) -> dict[str, list[float]]:
    key = f"bench-{time.time_ns()}"
    out: dict[str, list[float]] = {}
    seen = 0

    async def append(i: int) -> None:
        await store.append_entries(key, [entry(i)])

    async def read_new(i: int) -> None:
        nonlocal seen
        await store.append_entries(key, [entry(N + i)])
        rows = await store.entries_after(key, seen)
        seen = rows[-1][0]

    out["append 1 entry"] = await timed(N, append)
    seen = N
    out["append + read new"] = await timed(N, read_new)
    out[f"read all ({2 * N} entries)"] = await timed(20, lambda i: store.entries_after(key))
    pid = f"p-{key}"
    await store.set_usage(pid, None, json.dumps({"error_count": 0}))
    out["cooldown read"] = await timed(N, lambda i: store.usage_row(pid))

    async def cas(i: int) -> None:
        row = await store.usage_row(pid)
        assert row is not None
        assert await store.set_usage(pid, row.version, json.dumps({"error_count": i}))

    out["cooldown read + CAS write"] = await timed(N, cas)
    owner = PayloadOwnerRef(workflow_id=f"wf-{key}", run_id="r1")
    out[PUT] = await timed(PAYLOADS, lambda i: store.put_payload(*payload(i), owner))
    out[GET] = await timed(PAYLOADS, lambda i: store.payload(payload(i)[0]))
    return out


PUT = "offload a 200 KB payload"
GET = "read a 200 KB payload back"
_BASE = os.urandom(PAYLOAD_BYTES)


def payload(i: int) -> tuple[str, bytes]:
    data = i.to_bytes(4, "big") + _BASE[4:]
    return hashlib.sha256(data).hexdigest(), data


async def measure_payload_files(root: Path) -> dict[str, list[float]]:
    """The files the embedded default offloaded payloads to before, in a thread as its
    driver did."""
    driver = LocalFileStorageDriver(root)
    owner = ("wf/bench/r1", "bench", "r1")
    claims: list[dict[str, str]] = []

    async def put(i: int) -> None:
        claims.append(await asyncio.to_thread(driver._write, payload(i)[1], owner))

    out = {PUT: await timed(PAYLOADS, put)}
    out[GET] = await timed(PAYLOADS, lambda i: asyncio.to_thread(driver._read, claims[i]))
    return out


async def measure_files(checkout: Path, root: Path) -> dict[str, list[float]]:
    """The file store of an older checkout, called in threads as its activities did."""
    sys.path.insert(0, str(checkout))
    for name in [m for m in sys.modules if m.startswith(("activities", "agentlane"))]:
        del sys.modules[name]
    ts_mod = importlib.import_module("activities.transcript_store")
    pl_mod = importlib.import_module("activities.profile_listing")
    settings_mod = importlib.import_module("agentlane.settings")
    files = ts_mod.TranscriptStore(root / "sessions")
    key = "bench-files"
    out: dict[str, list[float]] = {}
    mk = importlib.import_module("agentlane.transcript")

    def old_entry(i: int) -> Any:
        return mk.TranscriptEntry(id=f"e{i}", role="assistant", ts=time.time(), text="x" * 400)

    out["append 1 entry"] = await timed(
        N, lambda i: asyncio.to_thread(files.append, key, [old_entry(i)])
    )

    async def read_new(i: int) -> None:
        await asyncio.to_thread(files.append, key, [old_entry(N + i)])
        await asyncio.to_thread(files.read, key)

    out["append + read new"] = await timed(N, read_new)

    def cold_read() -> None:
        ts_mod.TranscriptStore(root / "sessions").read(key)

    out[f"read all ({2 * N} entries)"] = await timed(20, lambda i: asyncio.to_thread(cold_read))
    settings = settings_mod.Settings(data_dir=root)
    listing = pl_mod.ProfileListing(settings)
    usage_mod = importlib.import_module("agentlane.profile_listing")
    state_mod = importlib.import_module("agentlane.profile_state")
    listing._update(
        usage_mod.UsageUpdate(profile_id="p", expected=None, new=state_mod.ProfileUsage())
    )
    shared = pl_mod.SharedCooldowns(settings)
    out["cooldown read"] = await timed(
        N, lambda i: asyncio.to_thread(lambda: (shared._current(), listing._read()))
    )

    def cas(i: int) -> None:
        current = listing._read().usage.get("p")
        new = state_mod.ProfileUsage(error_count=i)
        result = listing._update(usage_mod.UsageUpdate(profile_id="p", expected=current, new=new))
        assert result.applied

    out["cooldown read + CAS write"] = await timed(N, lambda i: asyncio.to_thread(cas, i))
    return out


def show(title: str, figures: dict[str, list[float]]) -> None:
    table = Table(title, ["operation", "p50 ms", "p99 ms", "samples"])
    for name, times in figures.items():
        table.add(name, f"{pct(times, 0.5):.3f}", f"{pct(times, 0.99):.3f}", len(times))
    table.print()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=Path, help="an older checkout with the file store")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = await open_store(Settings(data_dir=root))
        try:
            show("embedded (SQLite, WAL, synchronous=FULL)", await measure_store(store))
        finally:
            await store.close()
        url = os.environ.get("AGENTLANE_DATABASE_URL")
        if url:
            pg = await open_store(Settings(data_dir=root, database_url=url))
            try:
                show(f"{pg.backend}", await measure_store(pg))
            finally:
                await pg.close()
        files_before = await measure_payload_files(root / "p")
        show("payload files (before: the embedded default's)", files_before)
        if args.files:
            show(
                "files (the store before, fsync per append)",
                await measure_files(args.files, root / "files"),
            )


if __name__ == "__main__":
    asyncio.run(main())
