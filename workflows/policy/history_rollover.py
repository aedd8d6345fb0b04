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

from collections.abc import Callable
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
    at_rest: Callable[[], bool] | None = None,
    began: HistoryBounds = HistoryBounds(0, 0),
    settled: bool = True,
) -> bool:
    """`length`/`size`: the current history's events and bytes; `explicit_events`: a limit set
    by the caller (a lower one wins over the bounds); `suggested`: Temporal's own suggestion.

    `at_rest`: whether nothing is under way that would send the workflow a message (its
    session's run just ended); asked only once the history is halfway from where it `began`
    (the state carried into it) to the bounds, since it may cost a decode. Halfway is enough
    then: a message that reaches the server while the continue-as-new task is in flight fails
    that task (UNHANDLED_COMMAND) and costs a replay, and at rest none is likely to.

    `settled`: whether the run has lived past the server's minimal interval between two runs of
    one workflow id (a second by default: `ContinueAsNewMinInterval`). A run that continues as
    new sooner gets a next run whose first workflow task the server holds back until that
    second is over, and every message to the workflow waits with it (a watcher's next poll: a
    run's `agent_end` seen a second late). The hand-over at rest, an early one by choice, waits
    for it; the bounds and Temporal's suggestion do not.
    """
    limit = explicit_events
    if bounds is not None:
        if (
            settled
            and at_rest is not None
            and past_halfway(length, size, bounds, began)
            and at_rest()
        ):
            return True
        limit = min(limit or bounds.events, bounds.events)
        if size >= bounds.bytes:
            return True
    if limit is not None and length >= limit:
        return True
    return suggested


def past_halfway(length: int, size: int, bounds: HistoryBounds, began: HistoryBounds) -> bool:
    """Whether the history is halfway, in events or bytes, from where it began to its bounds."""
    return (
        length - began.events >= (bounds.events - began.events) // 2
        or size - began.bytes >= (bounds.bytes - began.bytes) // 2
    )
