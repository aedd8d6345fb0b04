"""A stream may hold an event twice (a retried step publishing again what its first attempt's
batch still carried); readers pass each event id on once, and say no gap for it."""

from __future__ import annotations

from collections.abc import AsyncIterator

from agentlane.events import AgentEvent, EventKind
from agentlane.seen_events import SeenEvents
from clients.api import StreamItem
from clients.gateway.sse import session_events


def test_an_id_is_first_seen_once_and_forgotten_past_the_limit() -> None:
    seen = SeenEvents(limit=2)
    assert seen.first_time("a") and not seen.first_time("a")
    assert seen.first_time("b") and seen.first_time("c")
    assert seen.first_time("a")  # remembered ids are the latest two
    assert seen.first_time("") and seen.first_time("")


def event(n: int, event_id: str) -> AgentEvent:
    return AgentEvent(
        kind=EventKind.TURN_START, event_id=event_id, session_key="s", run_id="r", turn_index=n
    )


async def test_the_gateway_sends_a_repeated_event_once_and_no_gap() -> None:
    async def items() -> AsyncIterator[StreamItem]:
        yield StreamItem(0, event(0, "r/turn_start/0"))
        yield StreamItem(1, event(0, "r/turn_end/0"))
        yield StreamItem(2, event(0, "r/turn_end/0"))  # the same event again
        yield StreamItem(3, event(1, "r/turn_start/1"))

    sent = [e async for e in session_events("s", items(), 0)]
    assert "gap" not in [e.event for e in sent]
    ids = [e.id for e in sent if e.id is not None]
    assert ids == ["0", "1", "3"], ids


def test_deltas_and_a_messages_end_are_never_dropped() -> None:
    """A call made again by the run gives its text the ids of the first call's (after a
    message_reset): those must reach the watcher."""
    seen = SeenEvents()
    for kind in (EventKind.TEXT_DELTA, EventKind.MESSAGE_END, EventKind.TOOL_EXECUTION_UPDATE):
        assert seen.first_time("m/a1/d/0", kind) and seen.first_time("m/a1/d/0", kind)
    assert seen.first_time("r/turn_end/0", EventKind.TURN_END)
    assert not seen.first_time("r/turn_end/0", EventKind.TURN_END)
