"""What a request is built from: resets, compactions and truncations read off an append-only
transcript (activities/context/context_view.py)."""

from __future__ import annotations

from activities.context.context_view import context_entries, is_summary
from agentlane.transcript import Role, ToolCall, TranscriptEntry
from agentlane.usage import Usage


def user(i: str, text: str = "") -> TranscriptEntry:
    return TranscriptEntry(id=i, role=Role.USER, ts=0, text=text or f"user {i}")


def assistant(
    i: str, calls: list[str] | None = None, usage: Usage | None = None
) -> TranscriptEntry:
    return TranscriptEntry(
        id=i,
        role=Role.ASSISTANT,
        ts=0,
        text=f"answer {i}",
        tool_calls=[ToolCall(id=c, name="read", arguments={"path": "a"}) for c in calls or []],
        usage=usage,
    )


def result(call: str, text: str = "content") -> TranscriptEntry:
    return TranscriptEntry(
        id=f"{call}:result", role=Role.TOOL, ts=0, tool_call_id=call, tool_name="read", text=text
    )


def marker(i: str, role: Role, **meta: object) -> TranscriptEntry:
    return TranscriptEntry(
        id=i, role=role, ts=0, text="summary" if role == Role.COMPACTION else "", meta=dict(meta)
    )


def ids(entries: list[TranscriptEntry]) -> list[str]:
    return [e.id for e in entries]


def test_plain_transcript_is_sent_as_it_is() -> None:
    entries = [user("u1"), assistant("a1")]
    view = context_entries(entries)
    assert ids(view.entries) == ["u1", "a1"]
    assert view.compaction is None and view.branch_start == 0


def test_nothing_before_the_latest_reset_is_sent() -> None:
    entries = [
        user("u1"),
        assistant("a1"),
        marker("r1", Role.RESET),
        user("u2"),
        marker("r2", Role.RESET),
        user("u3"),
        assistant("a3"),
    ]
    view = context_entries(entries)
    assert ids(view.entries) == ["u3", "a3"]
    assert view.branch_start == 5


def test_a_reset_drops_an_earlier_compaction() -> None:
    entries = [
        user("u1"),
        marker("c1", Role.COMPACTION, first_kept_id="u1"),
        marker("r", Role.RESET),
    ]
    view = context_entries(entries)
    assert view.entries == [] and view.compaction is None


def test_compaction_starts_the_request_with_its_summary_then_the_kept_entries() -> None:
    entries = [
        user("u1"),
        assistant("a1"),
        user("u2"),
        assistant("a2", ["t1"]),
        result("t1"),
        marker("c1", Role.COMPACTION, first_kept_id="u2"),
        assistant("a3"),
    ]
    view = context_entries(entries)
    assert is_summary(view.entries[0])
    assert view.entries[0].role == Role.USER
    assert "summary" in view.entries[0].text
    assert ids(view.entries[1:]) == ["u2", "a2", "t1:result", "a3"]
    # Only the entry written after the marker may calibrate token counts.
    assert view.fresh_from == 4


def test_only_the_latest_compaction_counts() -> None:
    entries = [
        user("u1"),
        user("u2"),
        marker("c1", Role.COMPACTION, first_kept_id="u2"),
        user("u3"),
        marker("c2", Role.COMPACTION, first_kept_id="u3"),
        user("u4"),
    ]
    view = context_entries(entries)
    assert view.compaction is not None and view.compaction.id == "c2"
    assert ids(view.entries[1:]) == ["u3", "u4"]


def test_a_split_turn_keeps_the_message_that_started_it() -> None:
    entries = [
        user("u1", "the task"),
        assistant("a1", ["t1"]),
        result("t1"),
        assistant("a2", ["t2"]),
        result("t2"),
        marker("c1", Role.COMPACTION, first_kept_id="a2", turn_start_id="u1"),
    ]
    view = context_entries(entries)
    assert ids(view.entries[1:]) == ["u1", "a2", "t2:result"]


def test_compaction_without_kept_entries_keeps_what_follows_it() -> None:
    entries = [user("u1"), marker("c1", Role.COMPACTION), user("u2")]
    assert ids(context_entries(entries).entries[1:]) == ["u2"]


def test_truncation_markers_replace_tool_result_texts_on_the_copy_only() -> None:
    big = result("t1", "x" * 1000)
    entries = [
        user("u1"),
        assistant("a1", ["t1"]),
        big,
        marker("x1", Role.TRUNCATION, replacements={"t1:result": "xx [cut]"}),
    ]
    view = context_entries(entries)
    sent = view.entries[-1]
    assert sent.text == "xx [cut]"
    assert sent.meta["truncated_from_chars"] == 1000
    assert big.text == "x" * 1000  # the stored entry is untouched
    assert view.truncated_ids == {"t1:result"}


def test_a_later_truncation_wins() -> None:
    entries = [
        assistant("a1", ["t1"]),
        result("t1", "y" * 100),
        marker("x1", Role.TRUNCATION, replacements={"t1:result": "first"}),
        marker("x2", Role.TRUNCATION, replacements={"t1:result": "second"}),
    ]
    assert context_entries(entries).entries[-1].text == "second"


def test_markers_are_never_sent() -> None:
    entries = [
        user("u1"),
        marker("b", Role.BRANCH, parent_session="p", branch_point="u1"),
        user("u2"),
    ]
    assert ids(context_entries(entries).entries) == ["u1", "u2"]
