"""Event ids a reader of a session's stream has passed on lately.

Every event has a stable id (agentlane/events.py and the activities that publish), and a stream
may hold an event twice: a step retried after a Temporal restart or a store outage can publish
again what its first attempt's batch was still carrying (seen with PostgreSQL and Temporal
restarted under load).
Readers (`watch`, the gateway's event stream) pass each id on once.
"""

from __future__ import annotations

from collections import deque

from agentlane.events import EventKind

# Ids remembered: far more than a run's events between a first attempt and its retry.
REMEMBERED = 4096

# Kinds whose id names one event for good: announced once by design, so a second copy is a
# duplicate. Not text and output deltas, blocks or a message's end: a call made again by the
# run (same message, its activity's first attempt again) gives those the same ids, after a
# `message_reset` that tells consumers to start the message over.
ONCE = frozenset(
    {
        EventKind.AGENT_START,
        EventKind.TURN_START,
        EventKind.MESSAGE_START,
        EventKind.TOOL_EXECUTION_START,
        EventKind.TOOL_EXECUTION_END,
        EventKind.TURN_END,
        EventKind.AGENT_END,
        EventKind.WARNING,
        EventKind.TOOL_LOOP,
        EventKind.COMPACTION_START,
        EventKind.COMPACTION_END,
        EventKind.SESSION_RESET,
        EventKind.STREAM_GAP,
        EventKind.MESSAGE_DROPPED,
        EventKind.APPROVAL_REQUESTED,
        EventKind.APPROVAL_DECIDED,
    }
)


class SeenEvents:
    def __init__(self, limit: int = REMEMBERED) -> None:
        self.limit = limit
        self._order: deque[str] = deque()
        self._ids: set[str] = set()

    def first_time(self, event_id: str, kind: EventKind | None = None) -> bool:
        """True the first time `event_id` is offered (an empty id always is: nothing to match;
        so is every event of a kind not in `ONCE`)."""
        if not event_id or (kind is not None and kind not in ONCE):
            return True
        if event_id in self._ids:
            return False
        self._ids.add(event_id)
        self._order.append(event_id)
        if len(self._order) > self.limit:
            self._ids.discard(self._order.popleft())
        return True
