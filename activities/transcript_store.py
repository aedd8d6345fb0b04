"""Transcripts as activities use them, over the store (`store/`), outside workflow history.

Activities run at least once, so every append is idempotent: an entry whose id the session has
is skipped, and a tool result for a tool call that already has one is skipped (every tool call
ends up with exactly one result, even when a retried attempt or a zombie worker on another host
writes again). The store enforces both with unique keys, in one transaction per append.

Reads are incremental: a process remembers the last sequence number it read for each session
and fetches only what came after, so long conversations do not cost a full re-read per model
call. And they are windowed (issue 26): a process keeps only the session's live context, the
entries from its context floor on (`agentlane/context_floor.py`), since nothing below it can
reach a request again. A session is read cold from its floor (recorded by the store with the
marker that set it), and what falls below a reset or compaction read in is dropped, so what a
session costs in memory and per cold read is its live context, not its age. Two reads, named
apart: `read_context` (the live window, for building requests) and `read_all` (the whole
transcript from the store, for a branch copy or `agentlane transcript --all`). Lookups by id
that can reach below the floor (`get`, `tool_result`, `read_run`) go to the store's indexed
queries.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from activities.bounded_cache import BoundedCache
from agentlane.context_floor import FLOOR_ROLES, context_floor
from agentlane.ids import storage_name
from agentlane.run import UserTurn
from agentlane.transcript import Role, ToolCall, TranscriptEntry, unanswered_text
from store.interface import Store


class TranscriptCorrupt(Exception):
    pass


def user_entries(turns: list[UserTurn], run_id: str, now: float) -> list[TranscriptEntry]:
    """The transcript entries of user turns a run received (ids from the session)."""
    return [
        TranscriptEntry(
            id=turn.entry_id,
            role=Role.USER,
            ts=now,
            run_id=run_id,
            text=turn.text,
            meta={"sender": turn.sender} if turn.sender else {},
        )
        for turn in turns
    ]


def tool_result_entry(
    tool_call_id: str,
    tool_name: str,
    text: str,
    run_id: str | None,
    *,
    is_error: bool,
    ts: float | None = None,
    meta: dict[str, Any] | None = None,
) -> TranscriptEntry:
    """The one way a tool result entry is made; its id derives from the call id."""
    return TranscriptEntry(
        id=f"{tool_call_id}:result",
        role=Role.TOOL,
        ts=time.time() if ts is None else ts,
        run_id=run_id,
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        text=text,
        is_error=is_error,
        meta=meta or {},
    )


@dataclass
class _Parsed:
    # The last seq read, and the seq of `entries[0]` (seqs are dense: the store numbers a
    # session's entries 1, 2, ... under its lock); what lies below `start` was never read or
    # fell below the floor.
    seq: int = 0
    start: int = 1
    entries: list[TranscriptEntry] = field(default_factory=list)
    ids: dict[str, int] = field(default_factory=dict)
    answered: dict[str, int] = field(default_factory=dict)
    # Kept as entries are read, so a run's end never walks the whole transcript: the positions
    # of each run's entries, and the tool calls still without a result.
    by_run: dict[str, list[int]] = field(default_factory=dict)
    unanswered: dict[str, ToolCall] = field(default_factory=dict)
    # What the parsed entries take in memory, roughly (`approx_entry_bytes`).
    size: int = 0


def approx_entry_bytes(entry: TranscriptEntry) -> int:
    """What a parsed entry holds in memory, roughly: a fixed part for the model objects
    (measured: 2.2 KB for a 340-byte stored entry) and its text, twice over (the strings and
    what indexes them)."""
    size = 1536 + 2 * (len(entry.text) + len(entry.reasoning) + len(entry.id))
    for call in entry.tool_calls:
        size += 512 + 2 * len(str(call.arguments))
    return size


# How many sessions' live contexts one worker process keeps parsed in memory, and how many bytes
# of parsed entries at most (`Settings.transcript_cache_bytes`, AGENTLANE_TRANSCRIPT_CACHE_MB):
# a session's live context grows until a compaction, so a count of sessions alone bounds
# nothing. A session used within `ACTIVE_SECONDS` counts as active (`BoundedCache.trim_active`).
PARSED_SESSIONS_KEPT = 256
PARSED_BYTES_KEPT = 256 * 2**20
ACTIVE_SECONDS = 60.0


# Runs whose workspace a worker remembers (a few hundred bytes each).
RUN_WORKSPACES_KEPT = 4096


class TranscriptStore:
    def __init__(
        self, store: Store, local_root: Path | None = None, cache_bytes: int = PARSED_BYTES_KEPT
    ) -> None:
        self.store = store
        self.cache_bytes = cache_bytes
        # This host's own folder per session, for what only exists on this host (the records
        # of its background processes); the transcript itself is in the store.
        self.local_root = local_root
        # Parsed transcripts of the sessions used most recently (a worker that served
        # thousands of sessions keeps only these; another is read again from the store).
        self._cache: BoundedCache[str, _Parsed] = BoundedCache(PARSED_SESSIONS_KEPT)
        # One refresh at a time per session: two concurrent readers would fetch the same rows.
        self._locks: BoundedCache[str, asyncio.Lock] = BoundedCache(PARSED_SESSIONS_KEPT)
        # Each run's workspace as recorded or read: a run's workspace never changes, and every
        # model call of the run asks for it (a store read and a thread hop saved a step).
        self._workspaces: BoundedCache[tuple[str, str], str] = BoundedCache(RUN_WORKSPACES_KEPT)

    def describe(self) -> str:
        return f"the {self.store.backend} store"

    def session_dir(self, key: str) -> Path:
        """This host's folder for the session (`agentlane.ids.storage_name`)."""
        if self.local_root is None:
            raise RuntimeError("this transcript store has no local folder (local_root)")
        return self.local_root / storage_name(key)

    # -- a run's context -------------------------------------------------------------------

    async def record_run_workspace(self, key: str, run_chain: str, workspace: str) -> None:
        """Remember the workspace of one run (`run_chain`: run id and chain token), so that its
        later steps need not carry the path in their inputs, and so in history."""
        if await self.run_workspace(key, run_chain) == workspace:
            return
        await self.store.set_run_workspace(key, run_chain, workspace)
        self._workspaces[(key, run_chain)] = workspace

    async def run_workspace(self, key: str, run_chain: str) -> str | None:
        known = self._workspaces.get((key, run_chain))
        if known is not None:
            return known
        recorded = await self.store.run_workspace(key, run_chain)
        if recorded is not None:
            self._workspaces[(key, run_chain)] = recorded
        return recorded

    # -- where a run's events start in the session's stream --------------------------------

    async def record_stream_start(self, key: str, run_id: str, offset: int) -> None:
        """Remember the stream offset at which `run_id` began (one run at a time per session,
        so one small record, overwritten: it never grows with the session)."""
        await self.store.set_stream_start(key, run_id, offset)

    async def stream_start(self, key: str, run_id: str) -> int | None:
        recorded = await self.store.stream_start(key)
        return recorded[1] if recorded is not None and recorded[0] == run_id else None

    # -- reading ---------------------------------------------------------------------------

    async def _refresh(
        self,
        key: str,
        written: list[tuple[int, TranscriptEntry]] | None = None,
        recheck: bool = True,
    ) -> _Parsed:
        """The session's parsed entries, brought up to date. `written`: what this process has
        just appended, with its seqs. `recheck=False`: a caller that brought the session up to
        date moments ago, in the same step, takes what is cached without asking the store
        again (what another process wrote since is read at the step's next check, as it would
        have been had it come a moment later)."""
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        async with lock:
            parsed = self._cache.get(key)
            cold = parsed is None
            if parsed is not None and not recheck and not written:
                return parsed
            if parsed is None:
                parsed = await self._read_cold(key)
                fresh = True
            elif written and parsed.seq == written[0][0] - 1:
                # Nothing came between what the cache holds and this process's own append (the
                # store numbers a session's entries densely, under its lock): taken as written,
                # without reading them back.
                fresh = self._add(parsed, written)
            else:
                fresh = self._add(parsed, await self.store.entries_after(key, parsed.seq))
            if fresh:
                self._cache[key] = parsed  # the most recent
                # Past the budget: idle sessions go first; a session read cold now is kept
                # only until the next one needs the room while every other is active (see
                # `BoundedCache.trim_active`).
                self._cache.trim_active(
                    self.cache_bytes,
                    lambda p: p.size,
                    idle_after=ACTIVE_SECONDS,
                    current=key,
                    newcomer=cold,
                )
            return parsed

    async def _read_cold(self, key: str) -> _Parsed:
        """The session read from its recorded floor (from its start when none is recorded)."""
        floor = await self.store.context_floor(key)
        parsed = _Parsed(seq=max(floor - 1, 0), start=max(floor, 1))
        rows = await self.store.entries_after(key, parsed.seq)
        if floor == 0 and any(e.role in FLOOR_ROLES for _, e in rows):
            # Written before floors were recorded: record it now, once.
            at = context_floor([e for _, e in rows])
            markers = [s for s, e in rows if e.role in FLOOR_ROLES]
            resets = [s for s, e in rows if e.role == Role.RESET]
            await self.store.record_context_floor(
                key, rows[at][0], markers[-1], resets[-1] if resets else 0
            )
        self._add(parsed, rows)
        return parsed

    def _add(self, parsed: _Parsed, rows: list[tuple[int, TranscriptEntry]]) -> bool:
        """Index what was read after `parsed`; then drop what a marker among it put below the
        floor. Whether anything was read."""
        for seq, entry in rows:
            self._index(parsed, entry)
            parsed.seq = seq
        if any(entry.role in FLOOR_ROLES for _, entry in rows):
            self._drop_below(parsed, context_floor(parsed.entries))
        return bool(rows)

    @classmethod
    def _drop_below(cls, parsed: _Parsed, index: int) -> None:
        """Keep the entries from `index` on (re-indexed: this happens once a compaction or
        reset, not once a run). The unanswered calls stay: they are the current run's."""
        if index <= 0:
            return
        kept = parsed.entries[index:]
        unanswered = parsed.unanswered
        parsed.start += index
        parsed.entries, parsed.ids, parsed.answered, parsed.by_run = [], {}, {}, {}
        parsed.size = 0
        for entry in kept:
            cls._index(parsed, entry)
        parsed.unanswered = unanswered

    @staticmethod
    def _index(parsed: _Parsed, entry: TranscriptEntry) -> None:
        index = len(parsed.entries)
        if entry.run_id is not None:
            parsed.by_run.setdefault(entry.run_id, []).append(index)
        parsed.entries.append(entry)
        parsed.size += approx_entry_bytes(entry)
        parsed.ids[entry.id] = index
        if entry.role == Role.TOOL and entry.tool_call_id:
            parsed.answered[entry.tool_call_id] = index
            parsed.unanswered.pop(entry.tool_call_id, None)
        elif entry.role == Role.ASSISTANT:
            for call in entry.tool_calls:
                if call.id not in parsed.answered:
                    parsed.unanswered[call.id] = call

    async def read_context(self, key: str, *, recheck: bool = True) -> list[TranscriptEntry]:
        """The session's live context: its entries from the context floor on (a suffix of the
        transcript over which `context_entries` reads exactly what it reads over the whole).
        What requests, compaction and truncation are built from; its cost is the live
        context's, whatever the session's age."""
        return list((await self._refresh(key, recheck=recheck)).entries)

    async def read_all(self, key: str) -> list[TranscriptEntry]:
        """The whole transcript, read from the store (not kept): for what needs the history
        below the floor too (a branch copy, `agentlane transcript --all`)."""
        return [entry for _, entry in await self.store.entries_after(key)]

    async def read_run(self, key: str, run_id: str) -> list[TranscriptEntry]:
        """The entries of one run, without walking the others (its cost is the run's span, not
        the session's age). A run that began below the floor (one a compaction happened in)
        is read from the store, from where it began."""
        parsed = await self._refresh(key)
        own = [parsed.entries[i] for i in parsed.by_run.get(run_id, [])]
        if parsed.start <= 1:
            return own
        began = await self.store.run_start(key, run_id)
        if began is None or began >= parsed.start:
            return own
        return [e for _, e in await self.store.entries_after(key, began - 1) if e.run_id == run_id]

    async def get(self, key: str, entry_id: str, *, recheck: bool = True) -> TranscriptEntry | None:
        parsed = await self._refresh(key, recheck=recheck)
        index = parsed.ids.get(entry_id)
        if index is not None:
            return parsed.entries[index]
        return await self.store.entry(key, entry_id) if parsed.start > 1 else None

    async def tool_result(self, key: str, tool_call_id: str) -> TranscriptEntry | None:
        parsed = await self._refresh(key)
        index = parsed.answered.get(tool_call_id)
        if index is not None:
            return parsed.entries[index]
        return await self.store.tool_result(key, tool_call_id) if parsed.start > 1 else None

    async def last_id(self, key: str) -> str | None:
        # The window always holds the last entry: a floor is never above its marker.
        entries = (await self._refresh(key)).entries
        return entries[-1].id if entries else None

    async def unanswered_tool_calls(self, key: str, *, recheck: bool = True) -> list[ToolCall]:
        """The tool calls without a result. Those of the current run: a compaction or reset
        comes between a run's steps, after every call before it was answered (a run's end
        answers what it left), so no call below the floor lacks a result."""
        return list((await self._refresh(key, recheck=recheck)).unanswered.values())

    # -- writing ---------------------------------------------------------------------------

    async def answer_unanswered(
        self, key: str, run_id: str, reason: str, *, recheck: bool = True
    ) -> list[TranscriptEntry]:
        """Answer every tool call that has no result yet, as an error result explaining `reason`
        (an `Unanswered` code, or the words themselves).

        Keeps the transcript valid (every call answered once) when calls were skipped or a run
        stopped before they ran.
        """
        now = time.time()
        return await self.append(
            key,
            [
                tool_result_entry(
                    call.id,
                    call.name,
                    unanswered_text(reason, call.name),
                    run_id,
                    is_error=True,
                    ts=now,
                )
                for call in await self.unanswered_tool_calls(key, recheck=recheck)
            ],
        )

    async def append(self, key: str, entries: list[TranscriptEntry]) -> list[TranscriptEntry]:
        """Append the entries not already present; return those actually written.

        Each entry's parent_id defaults to the id of the entry before it.
        """
        if not entries:
            return []
        written = await self.store.append_numbered(key, entries)
        # Something skipped was written by another process first (a retried attempt's, or one
        # that answered a call first): read back, so a step's later reads (`recheck=False`)
        # see what stands in the store.
        await self._refresh(key, written or None, recheck=len(written) < len(entries))
        return [entry for _, entry in written]
