"""Which of a run's events this worker process saw reach the session's stream.

At a run's end `finish_run` looks for the run's events that never reached the stream
(`activities/stream_gaps.py`): the events the transcript implies, against the run's events read
back from the stream with a query. When every one of them went out from this process in a
signal the server accepted, the read-back cannot find any missing, and it is skipped: a query
(a workflow task of the events workflow's worker and a round trip through the server) and the
decoding of every event of the run, which grows with the run. Any event this process cannot
vouch for (published by another worker, or before a restart, or in a batch whose fate is
unknown) sends the check to the stream as before.

Only the kinds the check expects are kept (a run's message and tool starts and ends), per run,
for at most `RUNS` runs and `PER_RUN` events each, until the run's end: a run past that bound is
never vouched for (its check reads the stream, a cost its length amortises), so memory stays
bounded however long the process lives.
"""

from __future__ import annotations

from activities.bounded_cache import BoundedCache
from activities.stream_gaps import gap_ids
from agentlane.events import AgentEvent, EventKind

# At most about 25 MB (256 runs of 1 024 ids), and a run's ids go when it ends.
RUNS = 256
PER_RUN = 1024
CHECKED_KINDS = frozenset(
    {
        EventKind.MESSAGE_START,
        EventKind.MESSAGE_END,
        EventKind.TOOL_EXECUTION_START,
        EventKind.TOOL_EXECUTION_END,
    }
)


class DeliveredEvents:
    def __init__(self, runs: int = RUNS, per_run: int = PER_RUN) -> None:
        self.per_run = per_run
        # run id -> ids delivered; None once past `per_run` (vouches for nothing).
        self._runs: BoundedCache[str, set[str] | None] = BoundedCache(runs)

    def delivered(self, events: list[AgentEvent]) -> None:
        """`events` are in the stream (the signal that carried them was accepted)."""
        for event in events:
            if event.kind not in CHECKED_KINDS or not event.run_id:
                continue
            ids = self._runs.get(event.run_id, set())
            if ids is None:
                continue
            ids |= gap_ids(event)
            self._runs[event.run_id] = ids if len(ids) <= self.per_run else None

    def all_delivered(self, run_id: str, event_ids: set[str]) -> bool:
        """Whether every one of `event_ids` (of `run_id`) is known to be in the stream."""
        ids = self._runs.get(run_id)
        return ids is not None and event_ids <= ids

    def forget(self, run_id: str) -> None:
        self._runs.pop(run_id, None)
