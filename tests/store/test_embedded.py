"""What only the embedded backend has to show: a body runs on the store's thread in one go."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from agentlane.transcript import Role, TranscriptEntry
from store.embedded import EmbeddedStore
from store.sql_core import Tx


async def test_a_body_that_waits_on_anything_but_its_statements_is_refused(
    tmp_path: Path,
) -> None:
    store = EmbeddedStore.in_data_dir(tmp_path)
    try:

        async def waits(tx: Tx) -> int:
            await tx.execute(
                "INSERT INTO branch_sources (session_key, source) VALUES (?, ?)", ("s", "x")
            )
            await asyncio.sleep(0)  # would let another call's statement into this transaction
            return 1

        with pytest.raises(RuntimeError, match="awaited something other"):
            await store._session(waits, tx=True)
        # Rolled back: nothing of it stays, and the store goes on.
        assert await store.branch_source("s") is None
        assert await store.put_branch_source("s", "y")
    finally:
        await store.close()


class _CountingStore(EmbeddedStore):
    """The embedded store, counting the calls that went to its thread."""

    hops = 0

    async def _session(self, body, *, tx):  # type: ignore[no-untyped-def]
        self.hops += 1
        return await super()._session(body, tx=tx)


def _entry(i: int) -> TranscriptEntry:
    return TranscriptEntry(id=f"e{i}", role=Role.USER, ts=float(i), text=f"message {i}")


async def test_small_reads_are_answered_on_the_loop_and_see_every_commit(tmp_path: Path) -> None:
    store = _CountingStore.in_data_dir(tmp_path)
    try:
        await store.append_entries("s", [_entry(0)])
        for i in range(1, 6):
            await store.append_entries("s", [_entry(i)])
            before = store.hops
            # A cache's refresh right after a commit: the new entry, without a hop.
            assert [e.id for _, e in await store.entries_after("s", i)] == [f"e{i}"]
            assert (await store.entry("s", f"e{i}")) is not None
            assert store.hops == before
        # More than a few entries: read on the store's thread, all of them.
        for i in range(6, 40):
            await store.append_entries("s", [_entry(i)])
        before = store.hops
        assert [s for s, _ in await store.entries_after("s", 0)] == list(range(1, 41))
        assert store.hops == before + 1
    finally:
        await store.close()


async def test_a_read_the_loop_cannot_answer_goes_to_the_store_thread(tmp_path: Path) -> None:
    """The loop's reader never waits for the file (busy timeout 0) and hands any failure to the
    store's thread, which waits as every call there does, or reports the error."""
    store = _CountingStore(tmp_path / "agentlane.db", self_migrate=False)
    try:
        await store.status()  # opens the file, leaves the schema empty
        before = store.hops
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            await store.entries_after("s", 0)
        assert store.hops == before + 1  # peeked, failed, then asked the thread
        await store.migrate()
        await store.append_entries("s", [_entry(0)])
        before = store.hops
        assert [e.id for _, e in await store.entries_after("s", 0)] == ["e0"]
        assert store.hops == before
        assert store._reader is not None
        assert store._reader.execute("PRAGMA busy_timeout").fetchone()[0] == 0
        assert store._reader.execute("PRAGMA query_only").fetchone()[0] == 1
    finally:
        await store.close()


async def test_another_thread_reads_through_the_store_thread(tmp_path: Path) -> None:
    store = _CountingStore.in_data_dir(tmp_path)
    try:
        await store.append_entries("s", [_entry(0)])
        assert await store.entries_after("s", 0)  # this loop's thread owns the reader

        def elsewhere() -> list[str]:
            async def read() -> list[str]:
                return [e.id for _, e in await store.entries_after("s", 0)]

            return asyncio.run(read())

        before = store.hops
        assert await asyncio.to_thread(elsewhere) == ["e0"]
        assert store.hops == before + 1
    finally:
        await store.close()
