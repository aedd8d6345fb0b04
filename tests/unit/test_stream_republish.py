"""What a run's lost events are rebuilt from: its transcript entries and what the stream holds."""

from __future__ import annotations

from activities.stream_gaps import expected_event_ids, gap_ids
from activities.stream_republish import (
    RunsSeen,
    lifecycle_missing,
    published_after,
    rebuild,
    settled,
    shown_text,
)
from agentlane.events import AgentEvent, EventKind, lifecycle_event_id
from agentlane.transcript import Role, ToolCall, TranscriptEntry
from agentlane.usage import Usage
from clients.api import MessageView

RUN = "s:run-1"
T0 = f"{RUN}.abc:t0"
T1 = f"{RUN}.abc:t1"


def transcript() -> list[TranscriptEntry]:
    return [
        TranscriptEntry(id="u1", role=Role.USER, ts=10.0, run_id=RUN, text="read it"),
        TranscriptEntry(
            id=T0,
            role=Role.ASSISTANT,
            ts=11.0,
            run_id=RUN,
            text="Reading it.",
            tool_calls=[ToolCall(id="c1", name="read", arguments={"path": "notes.txt"})],
            stop_reason="tool_use",
            usage=Usage(input=5, output=3),
            model="offline/default",
        ),
        TranscriptEntry(
            id="c1:result",
            role=Role.TOOL,
            ts=12.0,
            run_id=RUN,
            text="alpha\nbeta\n",
            tool_call_id="c1",
            tool_name="read",
            meta={"summary": "2 lines", "duration_ms": 7},
        ),
        TranscriptEntry(
            id=T1, role=Role.ASSISTANT, ts=13.0, run_id=RUN, text="done", stop_reason="end_turn"
        ),
        # Another run's entry: never part of this run's events.
        TranscriptEntry(id="x", role=Role.ASSISTANT, ts=14.0, run_id="other", text="no"),
    ]


def ev(kind: EventKind, event_id: str, **fields: object) -> AgentEvent:
    return AgentEvent(kind=kind, event_id=event_id, session_key="s", run_id=RUN, **fields)  # type: ignore[arg-type]


def everything_missing(entries: list[TranscriptEntry]) -> dict[str, str]:
    missing = expected_event_ids(entries, RUN)
    missing.update(lifecycle_missing(entries, RUN, set()))
    return missing


def test_a_lost_run_is_rebuilt_in_the_order_it_was_published() -> None:
    entries = transcript()
    events = rebuild("s", RUN, entries, [], everything_missing(entries))
    assert [(e.kind.value, e.turn_index) for e in events] == [
        ("agent_start", None),
        ("turn_start", 0),
        ("message_start", 0),
        ("text_delta", 0),
        ("message_end", 0),
        ("tool_execution_start", 0),
        ("tool_execution_end", 0),
        ("turn_end", 0),
        ("turn_start", 1),
        ("message_start", 1),
        ("text_delta", 1),
        ("message_end", 1),
    ]
    assert all(e.data.get("republished") for e in events)
    assert len({e.event_id for e in events}) == len(events)
    # The lost events' own ids, so a consumer that had them drops the repeat.
    assert {e.event_id for e in events} >= set(everything_missing(entries))
    start, end = events[5], events[6]
    assert start.tool_call_id == end.tool_call_id == "c1" and start.tool_name == "read"
    assert start.data["input"] == {"path": "notes.txt"} and start.message_id == T0
    assert end.success and end.summary == "2 lines" and end.duration_ms == 7
    assert end.text == "alpha\nbeta\n"
    assert events[4].stop_reason == "tool_use" and events[4].usage == Usage(input=5, output=3)
    assert events[7].has_tool_calls is True
    assert events[0].data["model"] == "offline/default"
    view = MessageView()
    for event in events:
        view.apply(event)
    assert view.texts == {T0: "Reading it.", T1: "done"}


def test_only_the_missing_part_of_a_message_is_sent_again() -> None:
    entries = transcript()
    shown = [
        ev(EventKind.MESSAGE_START, f"{T0}/message_start", message_id=T0),
        ev(EventKind.TEXT_DELTA, f"{T0}/a1/d/0", message_id=T0, text="Read", index=0),
    ]
    missing = {f"{T0}/message_end": T0}
    events = rebuild("s", RUN, entries, shown, missing)
    assert [(e.kind, e.text, e.index) for e in events] == [
        (EventKind.TEXT_DELTA, "ing it.", 4),
        (EventKind.MESSAGE_END, None, None),
    ]
    view = MessageView()
    for event in [*shown, *events]:
        view.apply(event)
    assert view.texts[T0] == "Reading it."


def test_a_message_shown_differently_is_reset_then_told_whole() -> None:
    entries = transcript()
    shown = [ev(EventKind.TEXT_DELTA, f"{T0}/a1/d/0", message_id=T0, text="Wrong", index=0)]
    events = rebuild("s", RUN, entries, shown, {f"{T0}/message_end": T0})
    assert [e.kind for e in events] == [
        EventKind.MESSAGE_RESET,
        EventKind.TEXT_DELTA,
        EventKind.MESSAGE_END,
    ]
    view = MessageView()
    for event in [*shown, *events]:
        view.apply(event)
    assert view.texts[T0] == "Reading it."


def test_nothing_missing_rebuilds_nothing() -> None:
    entries = transcript()
    seen = set(everything_missing(entries))
    assert lifecycle_missing(entries, RUN, seen) == {}
    assert rebuild("s", RUN, entries, [], {}) == []


def test_a_message_started_again_by_a_retried_call_is_not_lost() -> None:
    # A model call retried after a crash starts its message under an id of its own; the check
    # must not take the message's start for lost (and publish it again after the run's later
    # events, at its end).
    entries = transcript()
    stream = [
        ev(kind, eid, message_id=eid.split("/")[0])
        for eid, kind in [
            (f"{T0}/message_start", EventKind.MESSAGE_START),
            (f"{T0}/message_end", EventKind.MESSAGE_END),
            ("c1/tool_execution_start", EventKind.TOOL_EXECUTION_START),
            ("c1/tool_execution_end", EventKind.TOOL_EXECUTION_END),
            (f"{T1}/message_start/7.a2", EventKind.MESSAGE_START),
            (f"{T1}/message_end", EventKind.MESSAGE_END),
        ]
    ]
    seen = {eid for event in stream for eid in gap_ids(event)}
    assert [eid for eid in expected_event_ids(entries, RUN) if eid not in seen] == []
    # Only a message start has an attempt's suffix to see through.
    other = ev(EventKind.TEXT_DELTA, f"{T1}/message_start/7.a2", message_id=T1)
    assert gap_ids(other) == {f"{T1}/message_start/7.a2"}


def test_the_last_turn_end_is_left_to_the_run_end() -> None:
    missing = lifecycle_missing(transcript(), RUN, set())
    assert lifecycle_event_id(RUN, EventKind.TURN_END, 0) in missing
    assert lifecycle_event_id(RUN, EventKind.TURN_END, 1) not in missing
    assert lifecycle_missing(transcript(), "no-such-run", set()) == {}


def test_young_entries_are_not_yet_lost() -> None:
    entries = transcript()
    missing = everything_missing(entries)
    # At 14.5 with a 2 s settle: entries up to 12.5 count (the user entry, t0 and its result).
    kept = settled(missing, entries, 2.0, now=14.5)
    assert set(kept.values()) == {"u1", T0, "c1:result"}
    assert settled(missing, entries, 2.0, now=100.0) == missing


def test_shown_text_follows_resets_and_positions() -> None:
    events = [
        ev(EventKind.TEXT_DELTA, "a", message_id="m", text="abc", index=0),
        ev(EventKind.TEXT_DELTA, "b", message_id="m", text="cd", index=2),
        ev(EventKind.TEXT_DELTA, "c", message_id="other", text="zz", index=0),
    ]
    assert shown_text(events, "m") == "abcd"
    events.append(ev(EventKind.MESSAGE_RESET, "r", message_id="m"))
    assert shown_text(events, "m") == ""


def test_a_worker_remembers_the_runs_it_ran_a_step_of() -> None:
    seen = RunsSeen(limit=2)
    assert seen.first_here("a") and not seen.first_here("a")
    assert seen.first_here("b") and seen.first_here("c")
    assert seen.first_here("a")  # the oldest was forgotten


def test_what_a_truncated_stream_dropped_is_not_taken_for_lost() -> None:
    # The events workflow kept only what was published from 11.5 on: the run's start, its first
    # message's start and its turn start (published when the call began, after the user entry
    # at 10) are gone by truncation, not lost. Its end (11.0) is too. The read's start was
    # published at 12.0 - 0.007, its end at 12; the second message's after 12.
    entries = transcript()
    missing = everything_missing(entries)
    kept = published_after(missing, entries, horizon=11.5)
    assert lifecycle_event_id(RUN, EventKind.AGENT_START) not in kept
    assert f"{T0}/message_start" not in kept and f"{T0}/message_end" not in kept
    assert lifecycle_event_id(RUN, EventKind.TURN_START, 0) not in kept
    assert {"c1/tool_execution_start", "c1/tool_execution_end", f"{T1}/message_end"} <= set(kept)
    # Turn 1 began when the read's result was written (12.0).
    assert lifecycle_event_id(RUN, EventKind.TURN_START, 1) in kept
    assert published_after(missing, entries, horizon=20.0) == {}
