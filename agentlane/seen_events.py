"""Event ids a reader of a session's stream has passed on lately.

Every event has a stable id (agentlane/events.py and the activities that publish), and a stream
may hold an event twice: a step retried after a Temporal restart or a store outage can publish
again what its first attempt's batch was still carrying (seen with PostgreSQL and Temporal
restarted under load).
Readers (`watch`, the gateway's event stream) pass each id on once.
"""

from __future__ import annotations

from collections import deque

# Ids remembered: far more than a run's events between a first attempt and its retry.
REMEMBERED = 4096


class SeenEvents:
    def __init__(self, limit: int = REMEMBERED) -> None:
        self.limit = limit
        self._order: deque[str] = deque()
        self._ids: set[str] = set()

    def first_time(self, event_id: str) -> bool:
        """True the first time `event_id` is offered (an empty id always is: nothing to match)."""
        if not event_id:
            return True
        if event_id in self._ids:
            return False
        self._ids.add(event_id)
        self._order.append(event_id)
        if len(self._order) > self.limit:
            self._ids.discard(self._order.popleft())
        return True
