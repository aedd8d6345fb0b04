"""What a worker pays to read a session it does not hold (issue 26): a cold `TranscriptStore`
read plus a `get`, CPU time (`time.process_time()`, robust on a busy machine), before (the
transcript cache before this change, or at `--before REV`: it reads the whole transcript) and
after (it reads from the session's context floor).

    python bench/bench_transcript_window.py [--before REV] [--reps 5]

Sessions (embedded SQLite in a temporary folder; entries of about the soak's size): 2 000
entries without a compaction, and 20 000 with a compaction at 18 000 that keeps the 100 entries
before it. Then the soak's pattern (`round_robin`): sessions served in turn past the cache's
budget (room for their live contexts, not their whole transcripts), runs 1-10 and 141-150
against the last ten.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # runnable as a plain script

from activities import transcript_store as after  # noqa: E402
from agentlane.settings import Settings  # noqa: E402
from agentlane.transcript import Role, TranscriptEntry  # noqa: E402
from store.interface import Store  # noqa: E402
from store.open import open_store  # noqa: E402


def parent_of_this_change() -> str:
    """The commit before the context floor came: the transcript cache that read whole."""
    floor = ROOT / "agentlane" / "context_floor.py"
    added = subprocess.run(
        ["git", "-C", str(ROOT), "log", "--diff-filter=A", "--format=%H", "--", str(floor)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return f"{added[-1]}~1" if added else "HEAD"


def old_module(rev: str) -> ModuleType:
    """`activities/transcript_store.py` as it was at `rev`, beside today's imports."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:activities/transcript_store.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "transcript_store_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("transcript_store_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def soak_entry(n: int, prefix: str = "e") -> TranscriptEntry:
    """Entry `n` of a session in about the soak's shape: a turn, an answer, a tool result."""
    role = [Role.USER, Role.ASSISTANT, Role.TOOL][n % 3]
    return TranscriptEntry(
        id=f"{prefix}{n}",
        role=role,
        ts=1.0,
        run_id=f"run{n // 10}",
        text=("line of the file\n" * 6) if role == Role.TOOL else "step " * 8,
        tool_call_id=f"{prefix}call{n}" if role == Role.TOOL else None,
        tool_name="read" if role == Role.TOOL else None,
    )


def compaction(n: int, keep: int, prefix: str = "e") -> TranscriptEntry:
    return TranscriptEntry(
        id=f"{prefix}c{n}",
        role=Role.COMPACTION,
        ts=1.0,
        text="summary " * 200,
        meta={"first_kept_id": f"{prefix}{n - keep}"},
    )


async def fill(store: Store, key: str, total: int, compaction_at: int | None) -> str:
    """`total` entries; a compaction marker at `compaction_at` keeping the 100 before it.
    Returns the id of an entry of the session's start (what `get` looks up)."""
    batch: list[TranscriptEntry] = []
    for n in range(1, total + 1):
        batch.append(compaction(n, 100) if n == compaction_at else soak_entry(n))
        if len(batch) == 500:
            await store.append_entries(key, batch)
            batch = []
    await store.append_entries(key, batch)
    return "e5"


async def round_robin(
    module: Any, store: Store, sessions: int, runs: int, budget_mb: float
) -> list[float]:
    """Sessions served in turn, as the soak does: each run appends 10 entries and reads as a
    model call does (`get` of its new entry, the context); every 50 runs a compaction keeps
    the last 100 entries. CPU ms of each run number (summed over sessions)."""
    transcripts = module.TranscriptStore(store, cache_bytes=int(budget_mb * 2**20))
    read = getattr(transcripts, "read_context", None) or transcripts.read
    tag = f"{module.__name__}-{time.time_ns()}"
    per_run: list[float] = []
    for run in range(runs):
        started = time.process_time()
        for s in range(sessions):
            key = f"{tag}-{s}"
            base = run * 10
            batch = [soak_entry(base + i) for i in range(1, 11)]
            if run and run % 50 == 0:
                batch[-1] = compaction(base + 10, 100)
            await transcripts.get(key, batch[0].id)
            await transcripts.append(key, batch)
            await read(key)
        per_run.append((time.process_time() - started) * 1000)
    return per_run


async def cold_read_and_get(
    module: Any, store: Store, key: str, entry_id: str
) -> tuple[float, int]:
    """CPU seconds of a cold read (the live context, or the whole transcript before) and a
    `get`; and the parsed bytes the cache then holds for the session."""
    transcripts = module.TranscriptStore(store)
    started = time.process_time()
    read = getattr(transcripts, "read_context", None) or transcripts.read
    entries = await read(key)
    found = await transcripts.get(key, entry_id)
    spent = time.process_time() - started
    assert entries and found is not None and found.id == entry_id
    return spent, sum(p.size for p in transcripts._cache._items.values())


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", default=None, help="the revision to compare with")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--runs", type=int, default=200)
    # Room for the 20 live contexts (up to ~600 entries each), not for 20 whole transcripts.
    parser.add_argument("--budget-mb", type=float, default=24)
    args = parser.parse_args()
    before = old_module(args.before or parent_of_this_change())
    with tempfile.TemporaryDirectory() as tmp:
        store = await open_store(Settings(data_dir=Path(tmp)))
        sessions = {
            "2 000 entries": await fill(store, "small", 2_000, None),
            "20 000 entries, compaction at 18 000": await fill(store, "large", 20_000, 18_000),
        }
        print(f"{'session':<40}{'':>8}{'CPU ms (median)':>18}{'parsed MB':>12}")
        for (label, entry_id), key in zip(sessions.items(), ["small", "large"], strict=True):
            for name, module in (("before", before), ("after", after)):
                runs = [
                    await cold_read_and_get(module, store, key, entry_id) for _ in range(args.reps)
                ]
                cpu = statistics.median(r[0] for r in runs) * 1000
                print(f"{label:<40}{name:>8}{cpu:>18.1f}{runs[0][1] / 2**20:>12.2f}")
        print(
            f"\n{args.sessions} sessions in turn, {args.runs} runs each, a compaction every 50 "
            f"runs, cache budget {args.budget_mb:g} MB: CPU ms per run (all sessions), median"
        )
        # Runs 141-150 and the last ten stand at the same point of a compaction cycle.
        heads = ["runs 1-10", "runs 141-150", f"runs {args.runs - 9}-{args.runs}"]
        print(f"{'':>8}{''.join(f'{h:>14}' for h in heads)}{'total s':>10}")
        for name, module in (("before", before), ("after", after)):
            per_run = await round_robin(module, store, args.sessions, args.runs, args.budget_mb)
            spans = [per_run[:10], per_run[140:150], per_run[-10:]]
            cells = "".join(f"{statistics.median(span):>14.1f}" for span in spans)
            print(f"{name:>8}{cells}{sum(per_run) / 1000:>10.1f}")
        await store.close()


if __name__ == "__main__":
    asyncio.run(main())
