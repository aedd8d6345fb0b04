"""What only the embedded backend has to show: a body runs on the store's thread in one go."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest

import store.embedded as embedded
from agentlane.transcript import Role, TranscriptEntry
from store.embedded import EmbeddedStore
from store.sql_core import Tx


@pytest.fixture(autouse=True)
def _a_disk_never_found_slow(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a write goes is asserted here for a disk that is fine. On a loaded machine (the
    suite beside these tests) a commit on the loop can take over the slow-write limits, and the
    store then rightly sends the next writes to its thread; the test that is about that sets
    the limits itself."""
    monkeypatch.setattr(embedded, "STALL_SECONDS", 3600.0)
    monkeypatch.setattr(embedded, "SLOW_WRITE_SECONDS", 3600.0)


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


def _hold_the_thread(seconds: float) -> None:
    time.sleep(seconds)


def _rows_in_the_file_alone(path: Path) -> int:
    try:
        with sqlite3.connect(f"file:{path}?immutable=1", uri=True) as alone:
            return int(alone.execute("SELECT count(*) FROM transcript_entries").fetchone()[0])
    except sqlite3.DatabaseError:
        return 0  # not even the schema checkpointed yet


def _ids(path: Path, key: str) -> list[str]:
    """The session's entries as another process sees them: its own connection, in seq order."""
    with sqlite3.connect(path) as other:
        rows = other.execute(
            "SELECT entry_id FROM transcript_entries WHERE session_key = ? ORDER BY seq", (key,)
        ).fetchall()
    return [r[0] for r in rows]


async def test_a_short_append_commits_on_the_loop_and_is_durable_at_once(tmp_path: Path) -> None:
    store = _CountingStore.in_data_dir(tmp_path)
    try:
        await store.append_entries("s", [_entry(0)])  # opens and migrates on the thread
        before = store.hops
        for i in range(1, 5):
            await store.append_entries("s", [_entry(i)])
            # Committed before the call returned: another connection sees it.
            assert _ids(store.path, "s")[-1] == f"e{i}"
        assert store.hops == before
        assert store._writer is not None
        assert store._writer.execute("PRAGMA busy_timeout").fetchone()[0] == 0
        assert store._writer.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        # A large append is not short: the thread.
        await store.append_entries("s", [_entry(i) for i in range(10, 30)])
        assert store.hops == before + 1
    finally:
        await store.close()


async def test_a_write_lock_held_elsewhere_sends_the_append_to_the_thread(tmp_path: Path) -> None:
    """The loop never waits for the file: a lock held by another process (here another
    connection) hands the append to the store's thread, which waits for the lock there."""
    store = _CountingStore.in_data_dir(tmp_path)
    try:
        await store.append_entries("s", [_entry(0)])
        other = sqlite3.connect(store.path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        before = store.hops
        loop = asyncio.get_running_loop()
        started = loop.time()
        append = asyncio.create_task(store.append_entries("s", [_entry(1)]))
        await asyncio.sleep(0.3)
        # The loop kept running (this coroutine woke on time) and the append waits for the lock.
        assert loop.time() - started < 0.5
        assert not append.done() and store.hops == before + 1
        other.execute("COMMIT")
        other.close()
        await asyncio.wait_for(append, 10)
        assert _ids(store.path, "s") == ["e0", "e1"]
    finally:
        await store.close()


async def test_an_append_waits_behind_the_work_handed_to_the_thread(tmp_path: Path) -> None:
    """Order: while a body runs on the store's thread, a short append goes there too, after it."""
    store = _CountingStore.in_data_dir(tmp_path)
    try:
        await store.append_entries("s", [_entry(0)])
        seen: list[str] = []

        async def slow(tx: Tx) -> None:
            _hold_the_thread(0.2)  # on the store's thread: the loop goes on
            seen.extend(r[0] for r in await tx.fetch("SELECT entry_id FROM transcript_entries"))

        first = asyncio.create_task(store._session(slow, tx=True))
        await asyncio.sleep(0.05)
        before = store.hops
        await store.append_entries("s", [_entry(1)])
        await first
        assert store.hops == before + 1
        assert seen == ["e0"]  # the append did not land inside or before the earlier body
    finally:
        await store.close()


async def test_slow_writes_on_the_loop_send_the_next_ones_to_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _CountingStore.in_data_dir(tmp_path)
    try:
        await store.append_entries("s", [_entry(0)])
        monkeypatch.setattr(embedded, "STALL_SECONDS", 0.0)  # every commit is a stall
        before = store.hops
        await store.append_entries("s", [_entry(1)])  # on the loop, found slow
        assert store.hops == before
        for i in range(2, 5):
            await store.append_entries("s", [_entry(i)])
        assert store.hops == before + 3  # the cool-off
        monkeypatch.setattr(embedded, "STALL_SECONDS", 1.0)
        store._slow_until = 0.0  # the cool-off over
        await store.append_entries("s", [_entry(5)])
        assert store.hops == before + 3
        assert _ids(store.path, "s") == [f"e{i}" for i in range(6)]
    finally:
        await store.close()


@pytest.mark.parametrize("every", [4, 4000])
async def test_the_loops_writes_are_checkpointed_on_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, every: int
) -> None:
    monkeypatch.setattr(embedded, "CHECKPOINT_EVERY", every)
    store = EmbeddedStore.in_data_dir(tmp_path)
    try:
        for i in range(40):
            await store.append_entries("s", [_entry(i)])
            await asyncio.sleep(0.01)  # a worker's loop runs the checkpoint asked for
        for _ in range(500):  # the last one asked for (after the 40th) has run
            if not store._handed:
                break
            await asyncio.sleep(0.01)
        # The loop's writer never checkpoints (autocheckpoint off): only the thread's copy the
        # log into the database file. Read the file alone (immutable: the log is not looked at).
        in_file = _rows_in_the_file_alone(store.path)
        if every == 4:
            # Checkpoints after every 4th of the 39 commits on the loop (the first append
            # opened the file on the thread) copied rows into the file; how many depends on
            # what else was running when each one did (a passive checkpoint waits for nothing).
            assert 0 < in_file <= 40, in_file
        else:
            assert in_file == 0, in_file  # all of it still only in the log
        assert len(_ids(store.path, "s")) == 40
    finally:
        await store.close()


async def test_a_failing_write_on_the_loop_leaves_nothing_and_the_writer_usable(
    tmp_path: Path,
) -> None:
    store = _CountingStore.in_data_dir(tmp_path)
    try:
        await store.append_entries("s", [_entry(0)])

        async def half(tx: Tx) -> None:
            await tx.execute(
                "INSERT INTO branch_sources (session_key, source) VALUES (?, ?)", ("s", "x")
            )
            raise ValueError("the body failed after a statement")

        before = store.hops
        with pytest.raises(ValueError, match="body failed"):
            await store._short_tx(half)
        assert store.hops == before  # it ran on the loop's writer
        assert store._writer is not None and not store._writer.in_transaction
        assert await store.branch_source("s") is None  # rolled back
        await store.append_entries("s", [_entry(1)])
        assert store.hops == before
        assert _ids(store.path, "s") == ["e0", "e1"]
    finally:
        await store.close()
