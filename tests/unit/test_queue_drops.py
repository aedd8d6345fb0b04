"""Dropped messages keep their text (issue 19): the transcript entry, its event, how the
transcript prints it, and that the model never sees it."""

from __future__ import annotations

from pathlib import Path

from activities.context.context_view import context_entries
from activities.queue_drops import dropped_entry, dropped_event
from activities.transcript_store import TranscriptStore
from agentlane.events import EventKind
from agentlane.queue_drops import DropFate, DroppedMessage, drop_note
from agentlane.queue_settings import DropPolicy
from agentlane.settings import Settings
from agentlane.transcript import Role, TranscriptEntry
from clients.session_text import transcript_lines
from store.open import open_store


def dropped(seq: int, text: str, fate: DropFate = DropFate.SUMMARIZED) -> DroppedMessage:
    return DroppedMessage(
        seq=seq,
        entry_id=f"k.c:m{seq}",
        text=text,
        message_id=f"id-{seq}",
        sender="ann",
        policy=DropPolicy.SUMMARIZE if fate == DropFate.SUMMARIZED else DropPolicy.OLD,
        cap=20,
        fate=fate,
        at=1.0,
    )


def test_the_entry_keeps_the_full_text_and_who_sent_it() -> None:
    long = "x" * 5000
    entry = dropped_entry(dropped(7, long))
    assert entry.role == Role.DROPPED
    assert entry.id == "k.c:m7:dropped"
    assert entry.text == long
    assert entry.meta == {
        "seq": 7,
        "policy": "summarize",
        "cap": 20,
        "fate": "summarized",
        "message_id": "id-7",
        "sender": "ann",
    }


def test_the_event_names_the_message_and_belongs_to_no_run() -> None:
    event = dropped_event("k", dropped(7, "hello", DropFate.DROPPED))
    assert event.kind == EventKind.MESSAGE_DROPPED
    assert event.run_id == ""
    assert event.event_id == "k.c:m7:dropped/message_dropped"
    assert event.data["message_id"] == "id-7" and event.data["seq"] == 7
    assert event.data["fate"] == "dropped" and event.data["entry_id"] == "k.c:m7:dropped"
    assert event.text == drop_note(DropPolicy.OLD, 20, DropFate.DROPPED)
    assert "hello" not in (event.text or "")  # the text stays in the transcript


async def test_the_store_writes_each_once_and_the_model_never_sees_them(tmp_path: Path) -> None:
    store = TranscriptStore(await open_store(Settings(data_dir=tmp_path)))
    user = TranscriptEntry(id="k.c:m1", role=Role.USER, ts=1.0, text="say hi")
    await store.append("k", [user])
    entries = [dropped_entry(dropped(2, "two")), dropped_entry(dropped(3, "three"))]
    assert len(await store.append("k", entries)) == 2
    assert await store.append("k", entries) == []  # a retried activity writes nothing twice
    kept = await store.read_context("k")
    assert [e.text for e in kept] == ["say hi", "two", "three"]
    assert [e.parent_id for e in kept] == [None, "k.c:m1", "k.c:m2:dropped"]
    assert [e.text for e in context_entries(kept).entries] == ["say hi"]


def test_the_transcript_shows_each_dropped_message_with_its_mark() -> None:
    entries = [
        TranscriptEntry(id="u1", role=Role.USER, ts=1.0, text="say hi"),
        dropped_entry(dropped(2, "say two\nwith a second line")),
        dropped_entry(dropped(3, "say three", DropFate.DROPPED)),
    ]
    lines = transcript_lines(entries, show_all=True)
    assert lines[2].startswith(
        "── summarized: message #2 (id-2), queue full (cap 20, drop:summarize) ── (k.c:m2:dropped"
    )
    assert lines[3] == "say two\nwith a second line"
    assert lines[4].startswith("── dropped: message #3 (id-3), queue full (cap 20, drop:old) ──")
    assert lines[5] == "say three"


def test_drop_notes_say_where_the_text_is() -> None:
    summarized = drop_note(DropPolicy.SUMMARIZE, 20, DropFate.SUMMARIZED)
    assert summarized == (
        "dropped: the queue was full (cap 20, drop policy summarize); counted in the next "
        "run's overflow summary; full text in the transcript"
    )
    assert drop_note(DropPolicy.NEW, 1, DropFate.DROPPED).endswith("full text in the transcript")


def test_agui_shows_a_drop_inside_the_open_run_without_closing_it() -> None:
    """Drops happen while a run is busy: AG-UI clients get a CUSTOM event in that run, and the
    run goes on (an event of no run must not end the one that is open)."""
    from tests.unit.test_agui import R1, delta, ev, translate_all, validate

    events = [
        ev(EventKind.AGENT_START),
        ev(EventKind.TURN_START, turn_index=0),
        delta(f"{R1}:t0", 0, "1 2 "),
        dropped_event("web:alice", dropped(9, "say nine")),
        delta(f"{R1}:t0", 4, "3"),
        ev(EventKind.AGENT_END, termination_reason="no_tool_calls", data={"status": "success"}),
    ]
    out = translate_all(events)
    validate(out)
    types = [d["type"] for d in out]
    assert types.count("RUN_STARTED") == 1 and types.count("RUN_FINISHED") == 1
    [custom] = [d for d in out if d["type"] == "CUSTOM"]
    assert custom["name"] == "message_dropped"
    assert custom["value"]["message_id"] == "id-9" and custom["value"]["fate"] == "summarized"
    assert types.index("CUSTOM") < types.index("RUN_FINISHED")
