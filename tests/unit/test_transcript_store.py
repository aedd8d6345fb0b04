"""Transcripts over the store: idempotent appends, one result per tool call, incremental reads
across instances, concurrent appends (torn and corrupt lines of old files:
tests/unit/test_file_import.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from activities.transcript_store import TranscriptStore
from agentlane.settings import Settings
from agentlane.transcript import MAY_HAVE_RUN_TEXT, Role, ToolCall, TranscriptEntry, Unanswered
from store.open import open_store

KEY = "slack:C1"


@pytest.fixture
async def store(tmp_path: Path) -> TranscriptStore:
    return TranscriptStore(await open_store(Settings(data_dir=tmp_path)))


def user(eid: str, text: str = "hi", parent: str | None = None) -> TranscriptEntry:
    return TranscriptEntry(id=eid, role=Role.USER, ts=1.0, text=text, parent_id=parent)


def assistant(eid: str, *call_ids: str, text: str = "") -> TranscriptEntry:
    return TranscriptEntry(
        id=eid,
        role=Role.ASSISTANT,
        ts=2.0,
        text=text,
        tool_calls=[ToolCall(id=c, name="read", arguments={"path": f"{c}.txt"}) for c in call_ids],
    )


def result(eid: str, call_id: str, text: str = "ok") -> TranscriptEntry:
    return TranscriptEntry(
        id=eid, role=Role.TOOL, ts=3.0, tool_call_id=call_id, tool_name="read", text=text
    )


async def test_empty_session_reads_nothing(store: TranscriptStore) -> None:
    assert await store.read_context(KEY) == []
    assert await store.last_id(KEY) is None
    assert await store.get(KEY, "x") is None
    assert await store.unanswered_tool_calls(KEY) == []
    assert await store.append(KEY, []) == []


async def test_append_is_idempotent_by_entry_id(store: TranscriptStore) -> None:
    first = await store.append(KEY, [user("u1", "one"), user("u2", "two")])
    assert [e.id for e in first] == ["u1", "u2"]
    again = await store.append(KEY, [user("u1", "one, different text"), user("u3", "three")])
    assert [e.id for e in again] == ["u3"]
    assert [e.id for e in await store.read_context(KEY)] == ["u1", "u2", "u3"]
    assert (await store.read_context(KEY))[0].text == "one"


async def test_duplicate_ids_within_one_batch_are_written_once(store: TranscriptStore) -> None:
    written = await store.append(KEY, [user("u1", "a"), user("u1", "b")])
    assert [e.text for e in written] == ["a"]
    assert len(await store.read_context(KEY)) == 1


async def test_parent_ids_chain_and_explicit_parent_is_kept(store: TranscriptStore) -> None:
    await store.append(KEY, [user("u1"), assistant("a1")])
    await store.append(KEY, [user("u2"), user("u3", parent="u1")])
    entries = {e.id: e for e in await store.read_context(KEY)}
    assert entries["u1"].parent_id is None
    assert entries["a1"].parent_id == "u1"
    assert entries["u2"].parent_id == "a1"  # chains across appends
    assert entries["u3"].parent_id == "u1"  # explicit parent wins
    assert await store.last_id(KEY) == "u3"


async def test_skipped_duplicate_does_not_break_the_chain(store: TranscriptStore) -> None:
    await store.append(KEY, [user("u1"), user("u2")])
    await store.append(KEY, [user("u1"), user("u3")])
    assert await store.get(KEY, "u3") is not None
    assert (await store.get(KEY, "u3")).parent_id == "u2"  # type: ignore[union-attr]


async def test_tool_result_written_at_most_once_per_call(store: TranscriptStore) -> None:
    await store.append(KEY, [user("u1"), assistant("a1", "c1", "c2")])
    assert await store.append(KEY, [result("r1", "c1", "first")]) != []
    # A retried attempt writes a result for the same call under another entry id: ignored.
    assert await store.append(KEY, [result("r1-retry", "c1", "second")]) == []
    results = [e for e in await store.read_context(KEY) if e.role == Role.TOOL]
    assert [(e.id, e.text) for e in results] == [("r1", "first")]
    found = await store.tool_result(KEY, "c1")
    assert found is not None
    assert found.text == "first"
    assert await store.tool_result(KEY, "c2") is None
    assert await store.get(KEY, "r1-retry") is None


async def test_two_results_for_one_call_in_one_batch(store: TranscriptStore) -> None:
    await store.append(KEY, [assistant("a1", "c1")])
    written = await store.append(KEY, [result("r1", "c1", "x"), result("r2", "c1", "y")])
    assert [e.id for e in written] == ["r1"]
    assert [e.id for e in await store.read_context(KEY)] == ["a1", "r1"]


async def test_unanswered_tool_calls(store: TranscriptStore) -> None:
    await store.append(KEY, [user("u1"), assistant("a1", "c1", "c2", "c3")])
    assert [c.id for c in await store.unanswered_tool_calls(KEY)] == ["c1", "c2", "c3"]
    await store.append(KEY, [result("r2", "c2")])
    assert [c.id for c in await store.unanswered_tool_calls(KEY)] == ["c1", "c3"]
    await store.append(KEY, [result("r1", "c1"), result("r3", "c3"), assistant("a2", "c4")])
    calls = await store.unanswered_tool_calls(KEY)
    assert [c.id for c in calls] == ["c4"]
    assert calls[0].arguments == {"path": "c4.txt"}


async def test_a_command_left_unanswered_is_said_to_maybe_have_run(store: TranscriptStore) -> None:
    # A run terminated (or lost) mid-command leaves the call for the next run to answer: a
    # command may well have run, and "not executed" would have the model run it again.
    calls = [
        ToolCall(id="c1", name="read", arguments={"path": "a"}),
        ToolCall(id="c2", name="exec", arguments={"command": "deploy"}),
        ToolCall(id="c3", name="bash", arguments={"command": "git push"}),
    ]
    await store.append(
        KEY, [user("u1"), TranscriptEntry(id="a1", role=Role.ASSISTANT, ts=2.0, tool_calls=calls)]
    )
    answers = await store.answer_unanswered(KEY, "run", Unanswered.NOT_EXECUTED)
    texts = {a.tool_call_id: a.text for a in answers}
    assert texts["c1"] == "Tool call was not executed."
    assert texts["c2"] == texts["c3"] == MAY_HAVE_RUN_TEXT
    assert all(a.is_error for a in answers)


async def test_get_returns_the_entry(store: TranscriptStore) -> None:
    await store.append(KEY, [user("u1", "first"), user("u2", "second")])
    got = await store.get(KEY, "u1")
    assert got is not None
    assert got.text == "first"
    assert got.role == Role.USER


async def test_sessions_are_separate(store: TranscriptStore) -> None:
    await store.append("a", [user("u1", "for a")])
    await store.append("b", [user("u1", "for b")])
    assert [e.text for e in await store.read_context("a")] == ["for a"]
    assert [e.text for e in await store.read_context("b")] == ["for b"]


async def test_incremental_read_sees_appends_from_another_instance(tmp_path: Path) -> None:
    reader = TranscriptStore(await open_store(Settings(data_dir=tmp_path)))
    writer = TranscriptStore(await open_store(Settings(data_dir=tmp_path)))
    assert await reader.read_context(KEY) == []
    await writer.append(KEY, [user("u1"), assistant("a1", "c1")])
    assert [e.id for e in await reader.read_context(KEY)] == ["u1", "a1"]
    assert [c.id for c in await reader.unanswered_tool_calls(KEY)] == ["c1"]
    await writer.append(KEY, [result("r1", "c1"), user("u2")])
    assert [e.id for e in await reader.read_context(KEY)] == ["u1", "a1", "r1", "u2"]
    assert await reader.unanswered_tool_calls(KEY) == []
    assert await reader.last_id(KEY) == "u2"
    # The reader's own append knows about the other instance's entries.
    assert await reader.append(KEY, [result("r1-again", "c1"), user("u1")]) == []
    written = await reader.append(KEY, [user("u3")])
    assert written[0].parent_id == "u2"
    assert [e.id for e in await writer.read_context(KEY)] == ["u1", "a1", "r1", "u2", "u3"]


def count_reads(transcripts: TranscriptStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The entries each read of the store brought, one item per read, as they happen."""
    reads: list[int] = []
    entries_after = transcripts.store.entries_after

    async def counted(key: str, seq: int = 0) -> list[tuple[int, TranscriptEntry]]:
        found = await entries_after(key, seq)
        reads.append(len(found))
        return found

    monkeypatch.setattr(transcripts.store, "entries_after", counted)
    return reads


async def test_an_append_right_after_what_the_cache_holds_is_not_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step's own append goes into the cache as written (one read of the store less per
    append); an append after another instance's entries reads those back, and its own."""
    mine = TranscriptStore(await open_store(Settings(data_dir=tmp_path)))
    other = TranscriptStore(await open_store(Settings(data_dir=tmp_path)))
    reads = count_reads(mine, monkeypatch)
    await mine.append(KEY, [user("u1")])  # cold: the session is read whole once
    reads.clear()
    written = await mine.append(KEY, [assistant("a1", "c1"), result("r1", "c1")])
    assert reads == [] and [e.parent_id for e in written] == ["u1", "a1"]
    assert [e.id for e in await mine.read_context(KEY)] == ["u1", "a1", "r1"]
    assert await mine.unanswered_tool_calls(KEY) == []
    assert reads == [0, 0]  # each read still asks for what came since: nothing
    reads.clear()
    await other.append(KEY, [user("u2")])
    await mine.append(KEY, [user("u3")])
    assert reads == [2]  # the other's entry and this one, read back
    context = await mine.read_context(KEY)
    assert [e.id for e in context] == ["u1", "a1", "r1", "u2", "u3"]
    assert context[-1].parent_id == "u2"
    assert [e.id for e in await other.read_context(KEY)] == [e.id for e in context]


async def test_a_steps_later_reads_take_the_cache_without_asking_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`recheck=False` (a step's reads after its first): no read of the store when the session
    is cached; a session not cached is still read, and the next plain read sees what another
    instance wrote meanwhile."""
    mine = TranscriptStore(await open_store(Settings(data_dir=tmp_path)))
    other = TranscriptStore(await open_store(Settings(data_dir=tmp_path)))
    reads = count_reads(mine, monkeypatch)
    await other.append(KEY, [user("u1"), assistant("a1", "c1")])
    assert [e.id for e in await mine.read_context(KEY, recheck=False)] == ["u1", "a1"]
    assert reads == [2]  # not cached: read all the same
    reads.clear()
    await other.append(KEY, [result("r1", "c1")])
    assert (await mine.get(KEY, "a1", recheck=False)) is not None
    assert [c.id for c in await mine.unanswered_tool_calls(KEY, recheck=False)] == ["c1"]
    assert await mine.answer_unanswered(KEY, "run", "aborted", recheck=False) == []
    assert reads == [1]  # the answer the other wrote first stands, read back with the append
    assert await mine.get(KEY, "r1", recheck=False) is not None
    assert [e.id for e in await mine.read_context(KEY, recheck=False)] == ["u1", "a1", "r1"]
    assert reads == [1]


async def test_run_workspace_is_recorded_per_run_and_chain(tmp_path: Path) -> None:
    store = TranscriptStore(await open_store(Settings(data_dir=tmp_path)))
    assert await store.run_workspace("k", "session:k:run:1.abc") is None
    await store.record_run_workspace("k", "session:k:run:1.abc", "/w/one")
    await store.record_run_workspace("k", "session:k:run:1.def", "/w/two")  # the session reopened
    assert await store.run_workspace("k", "session:k:run:1.abc") == "/w/one"
    assert await store.run_workspace("k", "session:k:run:1.def") == "/w/two"
    await store.record_run_workspace("k", "session:k:run:1.abc", "/w/one")  # a retry: unchanged
    assert await store.run_workspace("k", "session:k:run:1.abc") == "/w/one"


async def test_run_workspace_read_once_then_remembered(tmp_path: Path) -> None:
    """Every model call of a run asks for its workspace: one store read per worker, then the
    worker's memory (a run's workspace never changes); one recorded by another host is read."""
    writer = TranscriptStore(await open_store(Settings(data_dir=tmp_path)))
    reader = TranscriptStore(await open_store(Settings(data_dir=tmp_path)))
    await writer.record_run_workspace("k", "session:k:run:1.abc", "/w/one")
    reads = 0
    real = reader.store.run_workspace

    async def counted(key: str, run_chain: str) -> str | None:
        nonlocal reads
        reads += 1
        return await real(key, run_chain)

    reader.store.run_workspace = counted  # type: ignore[method-assign]
    assert await reader.run_workspace("k", "session:k:run:1.none") is None
    for _ in range(5):
        assert await reader.run_workspace("k", "session:k:run:1.abc") == "/w/one"
    await reader.record_run_workspace("k", "session:k:run:1.abc", "/w/one")
    # Unknown runs are asked again (another host may record them later); known ones are not.
    assert await reader.run_workspace("k", "session:k:run:1.none") is None
    assert reads == 3


@pytest.mark.parametrize("shared_instance", [True, False])
async def test_concurrent_appends(tmp_path: Path, shared_instance: bool) -> None:
    tasks_n, per_task = 8, 30
    shared = TranscriptStore(await open_store(Settings(data_dir=tmp_path)))

    async def work(t: int) -> None:
        store = (
            shared
            if shared_instance
            else TranscriptStore(await open_store(Settings(data_dir=tmp_path)))
        )
        for i in range(per_task):
            # Each task also re-sends its previous entry: it must not be duplicated.
            batch = [user(f"t{t}-{i}", f"task {t} entry {i}")]
            if i:
                batch.insert(0, user(f"t{t}-{i - 1}"))
            await store.append(KEY, batch)

    await asyncio.gather(*(work(t) for t in range(tasks_n)))
    entries = await TranscriptStore(await open_store(Settings(data_dir=tmp_path))).read_context(KEY)
    ids = [e.id for e in entries]
    assert len(ids) == tasks_n * per_task
    assert set(ids) == {f"t{t}-{i}" for t in range(tasks_n) for i in range(per_task)}
    # Every entry's parent is the entry written just before it.
    assert entries[0].parent_id is None
    assert all(entries[n].parent_id == ids[n - 1] for n in range(1, len(entries)))
    assert [e.id for e in await shared.read_context(KEY)] == ids


async def test_a_runs_entries_are_read_without_the_others(store: TranscriptStore) -> None:
    def of(run: str, *entries: TranscriptEntry) -> list[TranscriptEntry]:
        return [e.model_copy(update={"run_id": run}) for e in entries]

    await store.append(KEY, of("r1", user("u1"), assistant("a1", "c1"), result("x1", "c1")))
    await store.append(KEY, of("r2", user("u2"), assistant("a2")))
    assert [e.id for e in await store.read_run(KEY, "r1")] == ["u1", "a1", "x1"]
    assert [e.id for e in await store.read_run(KEY, "r2")] == ["u2", "a2"]
    assert await store.read_run(KEY, "r3") == []
    # Another process (a fresh reader) indexes the store the same way.
    fresh = TranscriptStore(store.store)
    assert [e.id for e in await fresh.read_run(KEY, "r2")] == ["u2", "a2"]


async def test_an_answer_before_its_call_leaves_it_answered(store: TranscriptStore) -> None:
    await store.append(KEY, [result("r1", "c1"), assistant("a1", "c1", "c2")])
    assert [c.id for c in await store.unanswered_tool_calls(KEY)] == ["c2"]


async def test_the_stream_start_is_the_latest_runs_only(store: TranscriptStore) -> None:
    assert await store.stream_start(KEY, "r1") is None
    await store.record_stream_start(KEY, "r1", 40)
    assert await store.stream_start(KEY, "r1") == 40
    await store.record_stream_start(KEY, "r2", 75)
    assert await store.stream_start(KEY, "r2") == 75
    assert await store.stream_start(KEY, "r1") is None  # one small record per session
