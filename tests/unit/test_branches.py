"""Reset and branches, the pure parts (issue 10): which entries a branch copies (so the branch's
context is the parent's at that entry), what a reset receipt says, default branch keys, how the
transcript and the session tree print, and the activities' idempotent writes on a real store."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError

from activities.branch_history import (
    UnknownEntry,
    branch_path,
    current_branch,
    resets_of,
    unanswered_calls,
)
from activities.context.context_view import context_entries
from activities.providers.base import ModelRequest, ToolCallComplete
from activities.providers.offline import OfflineProvider
from activities.session_records import SessionRecords
from activities.session_tree import UNKNOWN_BRANCH_POINT, SessionTreeActivities
from activities.stream_publishers import SessionPublishers
from activities.transcript_store import TranscriptStore
from agentlane.branches import (
    BranchCopyInput,
    ResetInput,
    ResetMark,
    TreeNode,
    branch_key,
    reset_command,
    reset_entry_id,
    reset_note,
)
from agentlane.ids import check_session_key
from agentlane.session import BranchSource, SessionSettings
from agentlane.settings import Settings
from agentlane.transcript import Role, TranscriptEntry
from clients.session_text import transcript_lines, tree_lines
from store.open import open_store
from tests.unit.transcript_factory import assistant, call, result, user


def marker(entry_id: str, role: Role, ts: float = 1.0, **meta: object) -> TranscriptEntry:
    return TranscriptEntry(id=entry_id, role=role, ts=ts, meta=dict(meta))


def chained(*entries: TranscriptEntry) -> list[TranscriptEntry]:
    """As the store writes them: each entry's parent is the one before it."""
    out: list[TranscriptEntry] = []
    for entry in entries:
        out.append(entry.model_copy(update={"parent_id": out[-1].id if out else None}))
    return out


def ids(entries: list[TranscriptEntry]) -> list[str]:
    return [e.id for e in entries]


# -- which entries a branch copies ------------------------------------------------------------

FILE = chained(
    user("u1", "first"),
    assistant("a1", "one"),
    marker("r1", Role.RESET),
    user("u2", "second"),
    assistant("a2", "", call("c1")),
    result("c1"),
    assistant("a3", "two"),
    marker("k1", Role.COMPACTION, first_kept_id="a3"),
    user("u3", "third"),
    assistant("a4", "three"),
)


def test_a_branch_copies_its_own_branch_up_to_the_entry() -> None:
    assert ids(branch_path(FILE, "a1")) == ["u1", "a1"]
    assert ids(branch_path(FILE, "c1:result")) == ["u2", "a2", "c1:result"]
    assert ids(branch_path(FILE, "a4")) == ["u2", "a2", "c1:result", "a3", "k1", "u3", "a4"]


def test_the_copy_starts_a_new_chain() -> None:
    path = branch_path(FILE, "a3")
    assert path[0].parent_id is None, "its parent is the reset, not copied"
    assert [e.parent_id for e in path[1:]] == ids(path)[:-1]
    assert FILE[3].parent_id == "r1", "the parent's entries are not changed"


def test_the_copy_sees_what_the_parent_saw_at_that_entry() -> None:
    """Compaction markers on the path come along: the branch's view is the parent's."""
    for entry_id in ("a1", "a2", "a3", "k1", "u3", "a4"):
        end = ids(FILE).index(entry_id) + 1
        parent_view = context_entries(FILE[:end])
        branch_view = context_entries(branch_path(FILE, entry_id))
        assert ids(branch_view.entries) == ids(parent_view.entries), entry_id
    assert context_entries(branch_path(FILE, "a4")).summary is not None


def test_branching_from_a_reset_marker_is_a_fresh_context() -> None:
    path = branch_path(FILE, "r1")
    assert ids(path) == ["r1"] and not context_entries(path).entries


def test_a_branch_at_a_dropped_entry_keeps_the_results_of_calls_running_then() -> None:
    """The queue drops a message while a tool call runs: its entry lands between the call and
    its result. The calls had run in the parent; the branch must not say they were not."""
    file = chained(
        user("u1", "go"),
        assistant("a1", "", call("c1"), call("c2")),
        marker("d1", Role.DROPPED),
        result("c1"),
        marker("d2", Role.DROPPED),
        result("c2"),
        marker("d3", Role.DROPPED),
        assistant("a2", "done"),
    )
    for point in ("d1", "d2"):
        path = branch_path(file, point)
        assert ids(path) == ["u1", "a1", "d1", "c1:result", "d2", "c2:result"], point
        assert unanswered_calls(path) == [], point
    assert ids(branch_path(file, "d3"))[-1] == "d3"
    # A branch at the call itself is where the user chose: before its results.
    assert ids(branch_path(file, "a1")) == ["u1", "a1"]


def test_an_unknown_entry_is_refused() -> None:
    with pytest.raises(UnknownEntry):
        branch_path(FILE, "nope")


def test_a_branch_point_between_a_call_and_its_result_leaves_the_call_to_answer() -> None:
    assert unanswered_calls(branch_path(FILE, "a2")) == [("c1", "read")]
    assert unanswered_calls(branch_path(FILE, "c1:result")) == []


def test_resets_and_the_current_branch() -> None:
    assert resets_of(FILE) == [ResetMark(entry_id="r1", ts=1.0, after="a1")]
    hidden, shown = current_branch(FILE)
    assert hidden == 2 and ids(shown)[0] == "r1"
    assert current_branch(FILE[:2]) == (0, FILE[:2])


# -- words and ids ------------------------------------------------------------------------


def test_reset_receipt_notes() -> None:
    assert reset_note(None, 0) == "the next message starts afresh"
    assert reset_note("session:a:run:3", 1) == (
        "aborted session:a:run:3; 1 queued message kept: answered next, in the fresh context"
    )
    assert reset_note(None, 2).startswith("2 queued messages kept")


def test_ids_and_keys() -> None:
    assert reset_entry_id("alice", "abc", 2) == "alice.abc:reset2"
    assert reset_command() == "agentlane reset <session>"
    assert reset_command("slack:T1:C42") == "agentlane reset slack:T1:C42"
    assert branch_key("alice", 3) == "alice-b3"
    long = branch_key("k" * 128, 12)
    assert len(long) == 128 and long.endswith("-b12")
    assert check_session_key(branch_key("slack:T1:run9", 1)) == "slack:T1:run9-b1"


def test_offline_tool_call_ids_do_not_repeat_after_a_reset() -> None:
    """The offline model counts what it was sent; after a reset the counts start again, so its
    ids also carry the message being answered (the store keeps one result per call id)."""

    async def first_call_id(entries: list[TranscriptEntry]) -> str:
        request = ModelRequest(model="planner", system="", entries=entries, tools=[])
        async for event in OfflineProvider(0, 0).stream(request, None):
            if isinstance(event, ToolCallComplete):
                return event.id
        raise AssertionError("no tool call")

    before = asyncio.run(first_call_id([user("s.c:m1", "read a.txt")]))
    after = asyncio.run(first_call_id([user("s.c:m4", "read a.txt")]))
    again = asyncio.run(first_call_id([user("s.c:m1", "read a.txt")]))
    assert before.startswith("call_1_0_") and after.startswith("call_1_0_")
    assert before != after and before == again


# -- printing ---------------------------------------------------------------------------------


def test_the_transcript_shows_the_current_branch_and_markers_as_one_line() -> None:
    lines = transcript_lines(FILE)
    assert lines[0] == "(2 earlier entries before the latest reset; --all shows them)"
    assert lines[1].startswith("── reset ── (r1, ")
    assert "[user] u1" not in lines and "[user] u2" in lines
    compacted = next(line for line in lines if "compacted" in line)
    assert compacted.startswith("── compacted: 3 entries summarised ── (k1, ")
    assert "  → read({}) [c1]" in lines
    assert "[tool] c1:result (read c1)" in lines
    whole = transcript_lines(FILE, show_all=True)
    assert whole[:2] == ["[user] u1", "first"] and not whole[0].startswith("(")


def test_recorded_marker_figures_are_used_when_present() -> None:
    entries = chained(
        user("u1"),
        marker("k", Role.COMPACTION, summarized=7),
        marker("t", Role.TRUNCATION, replacements={"x": "y", "z": "w"}),
        marker("b", Role.BRANCH, parent_session="p", branch_point="e9"),
        marker("r", Role.RESET, by="cli:ann", reason="user reset"),
    )
    lines = transcript_lines(entries, show_all=True)
    assert lines[2].startswith("── compacted: 7 entries summarised ── (k, ")
    assert lines[3].startswith("── truncated: 2 tool results cut to fit ── (t, ")
    assert lines[4].startswith("── branched from p at e9 ── (b, ")
    assert lines[5].startswith("── reset ── (r, ") and lines[5].endswith(
        ", by cli:ann: user reset)"
    )


def test_the_tree_puts_branches_under_parents_and_resets_in_time_order() -> None:
    def fmt(ts: float) -> str:
        return f"t{ts:g}"

    nodes = [
        TreeNode(key="a", status="running", started=1, resets=[ResetMark(entry_id="r", ts=3)]),
        TreeNode(key="a-b1", status="closed", started=2, parent_session="a", branch_point="e1"),
        TreeNode(key="a-b2", status="running", started=4, parent_session="a", branch_point="e2"),
        TreeNode(key="a-b1-b1", started=5, parent_session="a-b1", branch_point="e3"),
        TreeNode(key="orphan", started=6, parent_session="gone", branch_point="e4"),
    ]
    assert tree_lines(nodes, fmt) == [
        "a (running, started t1)",
        "├── a-b1 (closed, started t2), branched at e1",
        "│   └── a-b1-b1 (?, started t5), branched at e3",
        "├── reset t3 r",
        "└── a-b2 (running, started t4), branched at e2",
        "orphan (?, started t6), branched at e4 (branch of gone)",
    ]


# -- the activities' writes, on a real store --------------------------------------------------


async def make_tree(tmp_path: Path) -> tuple[TranscriptStore, SessionTreeActivities]:
    store = TranscriptStore(await open_store(Settings(data_dir=tmp_path)))
    return store, SessionTreeActivities(
        store, SessionRecords(store.store), SessionPublishers(timedelta(milliseconds=100))
    )


async def test_a_reset_marker_is_written_once_and_closes_open_calls(tmp_path: Path) -> None:
    store, tree = await make_tree(tmp_path)
    await store.append("s", [user("u1"), assistant("a1", "", call("c1"))])
    inp = ResetInput(session_key="s", entry_id="s.x:reset1", reason="r", by="me")
    written = await tree._write_reset(inp)
    assert written.parent_id == "c1:result" and written.closed_tool_calls == 1
    assert await tree._write_reset(inp) == written.model_copy(update={"closed_tool_calls": 0})
    entries = await store.read_all("s")
    assert ids(entries) == ["u1", "a1", "c1:result", "s.x:reset1"]
    assert entries[2].is_error and entries[-1].meta == {"reason": "r", "by": "me"}


async def test_a_branch_copy_is_idempotent_and_keeps_the_parent_settings(tmp_path: Path) -> None:
    store, tree = await make_tree(tmp_path)
    await store.append("p", [e.model_copy(update={"parent_id": None}) for e in FILE])
    settings = SessionSettings(workspace="/w", thinking="low")
    await SessionRecords(store.store).record("p", settings, None)
    inp = BranchCopyInput(
        session_key="c",
        source=BranchSource(parent_session="p", branch_point="a2"),
        entry_id="c.x:branch",
    )
    copied = await tree._copy(inp)
    assert copied.copied == 2 and copied.settings == settings
    assert (await tree._copy(inp)).copied == 2, "a retry writes nothing twice"
    entries = await store.read_all("c")
    assert ids(entries) == ["u2", "a2", "c1:result", "c.x:branch"]
    assert entries[2].is_error and entries[2].text == "Tool call was not executed."
    assert entries[3].parent_id == "c1:result"
    assert await SessionRecords(store.store).branch_of("c") == inp.source


async def test_a_branch_never_lands_on_another_history(tmp_path: Path) -> None:
    store, tree = await make_tree(tmp_path)
    await store.append("p", [user("u1"), assistant("a1", "one")])
    await store.append("taken", [user("other")])
    source = BranchSource(parent_session="p", branch_point="a1")
    with pytest.raises(ApplicationError, match="already has a transcript"):
        await tree._copy(BranchCopyInput(session_key="taken", source=source, entry_id="t:branch"))
    bad = BranchSource(parent_session="p", branch_point="zz")
    with pytest.raises(ApplicationError) as err:
        await tree._copy(BranchCopyInput(session_key="new", source=bad, entry_id="n:branch"))
    assert err.value.type == UNKNOWN_BRANCH_POINT and err.value.non_retryable
    assert not await store.read_all("new")
