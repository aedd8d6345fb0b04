"""The append-only transcript store: idempotent appends, one result per tool call, incremental
reads across instances, torn and corrupt lines, concurrent appends."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from activities.transcript_store import TranscriptStore
from agentlane.transcript import Role, ToolCall, TranscriptEntry

KEY = "slack:C1"


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


def file_lines(store: TranscriptStore, key: str = KEY) -> list[dict[str, object]]:
    raw = store.path(key).read_bytes()
    assert raw == b"" or raw.endswith(b"\n")
    return [json.loads(line) for line in raw.splitlines()]


@pytest.fixture
def store(tmp_path: Path) -> TranscriptStore:
    return TranscriptStore(tmp_path, fsync=False)


def test_empty_session_reads_nothing(store: TranscriptStore) -> None:
    assert store.read(KEY) == []
    assert store.last_id(KEY) is None
    assert store.get(KEY, "x") is None
    assert store.unanswered_tool_calls(KEY) == []
    assert store.append(KEY, []) == []
    assert not store.path(KEY).exists()


def test_file_lives_under_the_keys_storage_name(store: TranscriptStore, tmp_path: Path) -> None:
    store.append(KEY, [user("u1")])
    assert store.path(KEY) == tmp_path / "slack%3AC1" / "transcript.jsonl"
    assert store.path(KEY).is_file()
    # Only the project's user can read it.
    assert store.path(KEY).stat().st_mode & 0o777 == 0o600
    assert store.session_dir(KEY).stat().st_mode & 0o777 == 0o700
    assert (store.session_dir(KEY) / ".key").read_text() == KEY


def test_data_under_the_old_name_is_found_only_by_its_own_key(tmp_path: Path) -> None:
    """Earlier versions named `col:x`'s folder `col_x`, the same as `col_x`'s."""
    old = tmp_path / "col_x"
    old.mkdir()
    (old / "transcript.jsonl").write_text(
        '{"id":"col:x.abc:m1","role":"user","ts":1.0,"text":"from col:x"}\n'
    )
    store = TranscriptStore(tmp_path)
    assert store.session_dir("col:x") == old
    assert [e.text for e in store.read("col:x")] == ["from col:x"]
    # `col_x` (no colon) is named `col%5Fx` now, and never reads col:x's old folder.
    assert store.session_dir("col_x") == tmp_path / "col%5Fx"
    assert store.read("col_x") == []


def test_append_is_idempotent_by_entry_id(store: TranscriptStore) -> None:
    first = store.append(KEY, [user("u1", "one"), user("u2", "two")])
    assert [e.id for e in first] == ["u1", "u2"]
    again = store.append(KEY, [user("u1", "one, different text"), user("u3", "three")])
    assert [e.id for e in again] == ["u3"]
    assert [e.id for e in store.read(KEY)] == ["u1", "u2", "u3"]
    assert store.read(KEY)[0].text == "one"
    assert [line["id"] for line in file_lines(store)] == ["u1", "u2", "u3"]


def test_duplicate_ids_within_one_batch_are_written_once(store: TranscriptStore) -> None:
    written = store.append(KEY, [user("u1", "a"), user("u1", "b")])
    assert [e.text for e in written] == ["a"]
    assert len(file_lines(store)) == 1


def test_parent_ids_chain_and_explicit_parent_is_kept(store: TranscriptStore) -> None:
    store.append(KEY, [user("u1"), assistant("a1")])
    store.append(KEY, [user("u2"), user("u3", parent="u1")])
    entries = {e.id: e for e in store.read(KEY)}
    assert entries["u1"].parent_id is None
    assert entries["a1"].parent_id == "u1"
    assert entries["u2"].parent_id == "a1"  # chains across appends
    assert entries["u3"].parent_id == "u1"  # explicit parent wins
    assert store.last_id(KEY) == "u3"


def test_skipped_duplicate_does_not_break_the_chain(store: TranscriptStore) -> None:
    store.append(KEY, [user("u1"), user("u2")])
    store.append(KEY, [user("u1"), user("u3")])
    assert store.get(KEY, "u3") is not None
    assert store.get(KEY, "u3").parent_id == "u2"  # type: ignore[union-attr]


def test_tool_result_written_at_most_once_per_call(store: TranscriptStore) -> None:
    store.append(KEY, [user("u1"), assistant("a1", "c1", "c2")])
    assert store.append(KEY, [result("r1", "c1", "first")]) != []
    # A retried attempt writes a result for the same call under another entry id: ignored.
    assert store.append(KEY, [result("r1-retry", "c1", "second")]) == []
    results = [e for e in store.read(KEY) if e.role == Role.TOOL]
    assert [(e.id, e.text) for e in results] == [("r1", "first")]
    found = store.tool_result(KEY, "c1")
    assert found is not None
    assert found.text == "first"
    assert store.tool_result(KEY, "c2") is None
    assert store.get(KEY, "r1-retry") is None


def test_two_results_for_one_call_in_one_batch(store: TranscriptStore) -> None:
    store.append(KEY, [assistant("a1", "c1")])
    written = store.append(KEY, [result("r1", "c1", "x"), result("r2", "c1", "y")])
    assert [e.id for e in written] == ["r1"]
    assert [line["id"] for line in file_lines(store)] == ["a1", "r1"]


def test_unanswered_tool_calls(store: TranscriptStore) -> None:
    store.append(KEY, [user("u1"), assistant("a1", "c1", "c2", "c3")])
    assert [c.id for c in store.unanswered_tool_calls(KEY)] == ["c1", "c2", "c3"]
    store.append(KEY, [result("r2", "c2")])
    assert [c.id for c in store.unanswered_tool_calls(KEY)] == ["c1", "c3"]
    store.append(KEY, [result("r1", "c1"), result("r3", "c3"), assistant("a2", "c4")])
    calls = store.unanswered_tool_calls(KEY)
    assert [c.id for c in calls] == ["c4"]
    assert calls[0].arguments == {"path": "c4.txt"}


def test_get_returns_the_entry(store: TranscriptStore) -> None:
    store.append(KEY, [user("u1", "first"), user("u2", "second")])
    got = store.get(KEY, "u1")
    assert got is not None
    assert got.text == "first"
    assert got.role == Role.USER


def test_sessions_are_separate(store: TranscriptStore) -> None:
    store.append("a", [user("u1", "for a")])
    store.append("b", [user("u1", "for b")])
    assert [e.text for e in store.read("a")] == ["for a"]
    assert [e.text for e in store.read("b")] == ["for b"]


def test_incremental_read_sees_appends_from_another_instance(tmp_path: Path) -> None:
    reader = TranscriptStore(tmp_path, fsync=False)
    writer = TranscriptStore(tmp_path, fsync=False)
    assert reader.read(KEY) == []
    writer.append(KEY, [user("u1"), assistant("a1", "c1")])
    assert [e.id for e in reader.read(KEY)] == ["u1", "a1"]
    assert [c.id for c in reader.unanswered_tool_calls(KEY)] == ["c1"]
    writer.append(KEY, [result("r1", "c1"), user("u2")])
    assert [e.id for e in reader.read(KEY)] == ["u1", "a1", "r1", "u2"]
    assert reader.unanswered_tool_calls(KEY) == []
    assert reader.last_id(KEY) == "u2"
    # The reader's own append knows about the other instance's entries.
    assert reader.append(KEY, [result("r1-again", "c1"), user("u1")]) == []
    written = reader.append(KEY, [user("u3")])
    assert written[0].parent_id == "u2"
    assert [e.id for e in writer.read(KEY)] == ["u1", "a1", "r1", "u2", "u3"]


def test_reader_starts_over_when_the_file_shrinks(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path, fsync=False)
    store.append(KEY, [user("u1"), user("u2")])
    assert len(store.read(KEY)) == 2
    other = TranscriptStore(tmp_path / "elsewhere", fsync=False)
    other.append(KEY, [user("x1")])
    store.path(KEY).write_bytes(other.path(KEY).read_bytes())
    assert [e.id for e in store.read(KEY)] == ["x1"]


def test_torn_last_line_is_ignored_then_repaired(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path, fsync=False)
    store.append(KEY, [user("u1"), user("u2")])
    path = store.path(KEY)
    good = path.read_bytes()
    torn = user("u3", "never finished").model_dump_json().encode()[:25]
    with path.open("ab") as fh:
        fh.write(torn)
    # Reads (this instance, and a fresh one) skip the partial line.
    assert [e.id for e in store.read(KEY)] == ["u1", "u2"]
    fresh = TranscriptStore(tmp_path, fsync=False)
    assert [e.id for e in fresh.read(KEY)] == ["u1", "u2"]
    # The next append truncates the torn tail before writing.
    written = fresh.append(KEY, [user("u4")])
    assert [e.id for e in written] == ["u4"]
    data = path.read_bytes()
    assert data.startswith(good)
    assert torn not in data
    assert [line["id"] for line in file_lines(fresh)] == ["u1", "u2", "u4"]
    assert [e.id for e in store.read(KEY)] == ["u1", "u2", "u4"]
    assert store.get(KEY, "u4").parent_id == "u2"  # type: ignore[union-attr]


def test_torn_only_line_is_repaired(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path, fsync=False)
    path = store.path(KEY)
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"id": "half')
    assert store.read(KEY) == []
    store.append(KEY, [user("u1")])
    assert [line["id"] for line in file_lines(store)] == ["u1"]


def test_a_corrupt_line_is_skipped_and_the_session_goes_on(tmp_path: Path) -> None:
    """One damaged line (garbage, a foreign write) never bricks a session: it is skipped,
    reported with its byte offset, left in the file, and appends go on after it."""
    store = TranscriptStore(tmp_path, fsync=False)
    store.append(KEY, [user("u1")])
    path = store.path(KEY)
    offset = path.stat().st_size
    with path.open("ab") as fh:
        fh.write(b"this is not json\n")
    fresh = TranscriptStore(tmp_path, fsync=False)
    assert [e.id for e in fresh.read(KEY)] == ["u1"]
    assert [at for at, _ in fresh.skipped_lines(KEY)] == [offset]
    assert [e.id for e in store.read(KEY)] == ["u1"]
    store.append(KEY, [user("u2")])
    assert [e.id for e in fresh.read(KEY)] == ["u1", "u2"]
    assert b"this is not json" in path.read_bytes(), "the file is only appended to"
    assert store.get(KEY, "u2") is not None and store.read(KEY)[-1].parent_id == "u1"


def test_valid_json_that_is_not_an_entry_is_skipped(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path, fsync=False)
    path = store.path(KEY)
    path.parent.mkdir(parents=True)
    good = user("u1").model_dump_json().encode()
    path.write_bytes(b'{"id": "x", "role": "robot", "ts": 1}\n' + good + b"\n")
    assert [e.id for e in store.read(KEY)] == ["u1"]
    assert len(store.skipped_lines(KEY)) == 1 and "role" in store.skipped_lines(KEY)[0][1]


def test_reads_recover_without_duplicates_after_a_corrupt_line_is_removed(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path, fsync=False)
    store.append(KEY, [user("u1")])
    assert len(store.read(KEY)) == 1
    path = store.path(KEY)
    good_line = user("u2").model_dump_json().encode() + b"\n"
    with path.open("ab") as fh:
        fh.write(good_line + b"garbage\n")
    for _ in range(2):
        assert [e.id for e in store.read(KEY)] == ["u1", "u2"]
    # An operator removes the bad line: the cached instance reads the file afresh.
    path.write_bytes(path.read_bytes().removesuffix(b"garbage\n"))
    assert [e.id for e in store.read(KEY)] == ["u1", "u2"]
    assert store.skipped_lines(KEY) == []


def test_blank_lines_are_skipped(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path, fsync=False)
    store.append(KEY, [user("u1")])
    with store.path(KEY).open("ab") as fh:
        fh.write(b"\n")
    store.append(KEY, [user("u2")])
    assert [e.id for e in TranscriptStore(tmp_path).read(KEY)] == ["u1", "u2"]


def test_lines_omit_default_fields(store: TranscriptStore) -> None:
    store.append(KEY, [user("u1", "hello")])
    (line,) = file_lines(store)
    assert line == {"id": "u1", "role": "user", "ts": 1.0, "text": "hello"}


@pytest.mark.parametrize("shared_instance", [True, False])
def test_concurrent_appends_from_threads(tmp_path: Path, shared_instance: bool) -> None:
    threads_n, per_thread = 8, 50
    shared = TranscriptStore(tmp_path, fsync=False)
    barrier = threading.Barrier(threads_n)
    errors: list[BaseException] = []

    def work(t: int) -> None:
        store = shared if shared_instance else TranscriptStore(tmp_path, fsync=False)
        try:
            barrier.wait()
            for i in range(per_thread):
                # Each thread also re-sends its previous entry: it must not be duplicated.
                batch = [user(f"t{t}-{i}", f"thread {t} entry {i}")]
                if i:
                    batch.insert(0, user(f"t{t}-{i - 1}"))
                store.append(KEY, batch)
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(threads_n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    lines = file_lines(shared)
    ids = [str(line["id"]) for line in lines]
    expected = {f"t{t}-{i}" for t in range(threads_n) for i in range(per_thread)}
    assert len(ids) == threads_n * per_thread
    assert set(ids) == expected
    # Every entry's parent is the entry written just before it.
    assert lines[0].get("parent_id") is None
    assert all(lines[n]["parent_id"] == ids[n - 1] for n in range(1, len(lines)))
    assert [e.id for e in TranscriptStore(tmp_path).read(KEY)] == ids


def test_run_workspace_is_recorded_per_run_and_chain(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path)
    assert store.run_workspace("k", "session:k:run:1.abc") is None
    store.record_run_workspace("k", "session:k:run:1.abc", "/w/one")
    store.record_run_workspace("k", "session:k:run:1.def", "/w/two")  # the session reopened
    assert store.run_workspace("k", "session:k:run:1.abc") == "/w/one"
    assert store.run_workspace("k", "session:k:run:1.def") == "/w/two"
    store.record_run_workspace("k", "session:k:run:1.abc", "/w/one")  # a retry: unchanged
    assert store.run_workspace("k", "session:k:run:1.abc") == "/w/one"


def test_a_runs_entries_are_read_without_the_others(store: TranscriptStore) -> None:
    def of(run: str, *entries: TranscriptEntry) -> list[TranscriptEntry]:
        return [e.model_copy(update={"run_id": run}) for e in entries]

    store.append(KEY, of("r1", user("u1"), assistant("a1", "c1"), result("x1", "c1")))
    store.append(KEY, of("r2", user("u2"), assistant("a2")))
    assert [e.id for e in store.read_run(KEY, "r1")] == ["u1", "a1", "x1"]
    assert [e.id for e in store.read_run(KEY, "r2")] == ["u2", "a2"]
    assert store.read_run(KEY, "r3") == []
    # Another process (a fresh store) indexes the file the same way.
    fresh = TranscriptStore(store.root, fsync=False)
    assert [e.id for e in fresh.read_run(KEY, "r2")] == ["u2", "a2"]


def test_an_answer_before_its_call_leaves_it_answered(store: TranscriptStore) -> None:
    store.append(KEY, [result("r1", "c1"), assistant("a1", "c1", "c2")])
    assert [c.id for c in store.unanswered_tool_calls(KEY)] == ["c2"]


def test_the_stream_start_is_the_latest_runs_only(store: TranscriptStore) -> None:
    assert store.stream_start(KEY, "r1") is None
    store.record_stream_start(KEY, "r1", 40)
    assert store.stream_start(KEY, "r1") == 40
    store.record_stream_start(KEY, "r2", 75)
    assert store.stream_start(KEY, "r2") == 75
    assert store.stream_start(KEY, "r1") is None  # one small file, whatever the session's age
