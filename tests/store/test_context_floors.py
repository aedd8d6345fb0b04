"""Where a session's live context starts and where each run began (issue 26), on every backend
(tests/store/conftest.py), with the migration that added them (0005)."""

from __future__ import annotations

from typing import cast

from activities.transcript_store import TranscriptStore
from agentlane.transcript import Role, TranscriptEntry
from store.interface import Store
from store.sql_core import SqlStore, entry_body


def e(eid: str, role: Role = Role.USER, run: str | None = None, **meta: object) -> TranscriptEntry:
    return TranscriptEntry(id=eid, role=role, ts=1.0, text=eid, run_id=run, meta=dict(meta))


async def test_the_floor_is_recorded_with_the_marker_that_sets_it(store: Store) -> None:
    assert await store.context_floor("s") == 0
    await store.append_entries("s", [e("u1"), e("a1", Role.ASSISTANT), e("u2"), e("a2")])
    assert await store.context_floor("s") == 0
    # Kept from a2 (seq 4), with the turn that started at u2 (seq 3).
    compaction = e("c1", Role.COMPACTION, first_kept_id="a2", turn_start_id="u2")
    await store.append_entries("s", [compaction])
    assert await store.context_floor("s") == 3
    await store.append_entries("s", [e("u3"), e("c2", Role.COMPACTION, first_kept_id="u3")])
    assert await store.context_floor("s") == 6
    # Appended again (a retried activity): nothing written, nothing moves.
    await store.append_entries("s", [compaction])
    assert await store.context_floor("s") == 6
    # A reset keeps itself; a compaction naming what precedes the reset keeps only itself.
    await store.append_entries("s", [e("r", Role.RESET), e("u4")])
    assert await store.context_floor("s") == 8
    await store.append_entries("s", [e("c3", Role.COMPACTION, first_kept_id="u3")])
    assert await store.context_floor("s") == 10
    # In one batch: the names are found among the batch's own entries.
    await store.append_entries(
        "t", [e("u1"), e("a1"), e("c", Role.COMPACTION, first_kept_id="a1"), e("u2")]
    )
    assert await store.context_floor("t") == 2
    assert await store.context_floor("s") == 10


async def test_a_floor_recorded_late_never_replaces_a_later_markers(store: Store) -> None:
    await store.append_entries("s", [e("u1"), e("u2"), e("c", Role.COMPACTION, first_kept_id="u2")])
    assert await store.context_floor("s") == 2
    await store.record_context_floor("s", 1, 1, 0)  # from an older marker: ignored
    assert await store.context_floor("s") == 2
    await store.record_context_floor("s", 3, 3, 0)  # the same or a later marker: recorded
    assert await store.context_floor("s") == 3


async def test_each_run_is_found_where_it_began(store: Store) -> None:
    await store.append_entries("s", [e("u1", run="r1"), e("a1", run="r1"), e("x")])
    await store.append_entries("s", [e("a2", run="r1"), e("u2", run="r2")])
    assert await store.run_start("s", "r1") == 1
    assert await store.run_start("s", "r2") == 5
    assert await store.run_start("s", "r3") is None
    assert await store.run_start("t", "r1") is None


async def test_the_migration_finds_old_runs_and_old_floors_are_recorded_on_first_read(
    unmigrated_store: Store,
) -> None:
    store = cast(SqlStore, unmigrated_store)
    assert await store.migrate(up_to=4) == 4
    # What earlier versions wrote: entries only.
    old = [
        e("u1", run="r1"),
        e("a1", Role.ASSISTANT, run="r1"),
        e("u2", run="r2"),
        e("c", Role.COMPACTION, run="r2", first_kept_id="u2"),
        e("a2", Role.ASSISTANT, run="r2"),
    ]
    for seq, entry in enumerate(old, 1):
        await store._count(
            "INSERT INTO transcript_entries (session_key, seq, entry_id, result_for, body) "
            "VALUES (?, ?, ?, ?, ?)",
            ("s", seq, entry.id, None, entry_body(entry)),
        )
    assert await store.migrate() >= 5
    assert await store.run_start("s", "r1") == 1
    assert await store.run_start("s", "r2") == 3
    assert await store.context_floor("s") == 0
    # The first cold read finds the floor in what it read, and records it.
    transcripts = TranscriptStore(store)
    assert [x.id for x in await transcripts.read_context("s")] == ["u2", "c", "a2"]
    assert await store.context_floor("s") == 3
    assert [x.id for x in await TranscriptStore(store).read_context("s")] == ["u2", "c", "a2"]
    assert [x.id for x in await TranscriptStore(store).read_run("s", "r1")] == ["u1", "a1"]
