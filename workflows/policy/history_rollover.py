"""When a long-lived workflow continues as new (issue 26: nothing grows with a session's age).

A worker keeps each cached workflow's history in memory, and one that falls out of its cache (or
whose workflow task timed out on a busy worker) is rebuilt by replaying that history from its
first event. Temporal suggests continue-as-new only at 4 096 events or 4 MB; the session and its
event stream continue as new well before that, by events and by bytes, so the replay stays short
and the memory per cached workflow stays bounded. Histories recorded before the bounds continue
only at an explicit limit or on Temporal's suggestion (`bounds` None).

Pure: the workflows pass in what `workflow.info()` reports.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HistoryBounds:
    events: int
    bytes: int


def rollover_due(
    *,
    length: int,
    size: int,
    suggested: bool,
    explicit_events: int | None = None,
    bounds: HistoryBounds | None = None,
) -> bool:
    """`length`/`size`: the current history's events and bytes; `explicit_events`: a limit set
    by the caller (a lower one wins over the bounds); `suggested`: Temporal's own suggestion."""
    limit = explicit_events
    if bounds is not None:
        limit = min(limit or bounds.events, bounds.events)
        if size >= bounds.bytes:
            return True
    if limit is not None and length >= limit:
        return True
    return suggested
