"""Which run an abort reaches (SPEC §3: `abortEmbeddedPiRun` aborts the session's active run).

Here a run is made a little after its message is accepted: the sender's receipt says `started`
as soon as the message is in the session's state, and the session makes the run once it gets to
it (a fresh session first restores its settings and opens its event stream; a message that came
as a signal while no worker ran is accepted only then). An abort that lands in between is for
that run: it is held and delivered the moment the run starts, so the run ends as aborted like
any other aborted run. "Nothing to abort" is said only when no run is in progress and none is
about to be made.

A held abort covers the messages up to the one whose run it is for: a message queued behind it
(which would have waited behind a running run) runs after the aborted run, not inside it.

Pure functions over the session's queue, no I/O, no Temporal import.
"""

from __future__ import annotations

from enum import StrEnum

from agentlane.session import QueuedMessage


class AbortTarget(StrEnum):
    RUNNING = "running"  # a run exists (or is being started): signal it
    ABOUT_TO_START = "about_to_start"  # a run is announced, not made yet: hold the abort for it
    NOTHING = "nothing"


def announced_waiting(announced_seq: int | None, queue: list[QueuedMessage]) -> bool:
    """The message answered `started` is still in the queue, waiting for its run."""
    return announced_seq is not None and any(q.seq == announced_seq for q in queue)


def abort_target(
    running: bool, announced_seq: int | None, queue: list[QueuedMessage], accepting: int
) -> AbortTarget:
    """`accepting`: messages taken in (an update admitted, a signal in history) that wait for
    a reopened session's settings before they are numbered; the first of them starts a run."""
    if running:
        return AbortTarget.RUNNING
    if announced_waiting(announced_seq, queue) or accepting:
        return AbortTarget.ABOUT_TO_START
    return AbortTarget.NOTHING


def held_upto(announced_seq: int | None, queue: list[QueuedMessage], message_seq: int) -> int:
    """The newest message a held abort covers: the announced one, or else the first message
    still being accepted (it gets the next number)."""
    if announced_seq is not None and announced_waiting(announced_seq, queue):
        return announced_seq
    return message_seq + 1


def held_run_queue(queue: list[QueuedMessage], upto_seq: int) -> list[QueuedMessage] | None:
    """What the run a held abort is for takes: the queued messages it covers, in queue order.
    None: none is queued (the queue cap dropped it, or it was a duplicate), so that run will
    never be made and the abort has nothing left to stop."""
    covered = [q for q in queue if q.seq <= upto_seq]
    return covered or None


def abort_note(run_id: str | None, waiting: int, held: bool) -> str:
    """The receipt's words for the operator."""
    if run_id is None:
        note = "nothing to abort: no run is in progress"
        if waiting:
            note += f" ({waiting} queued message(s) will run)"
        return note
    note = f"aborting {run_id}"
    if held:
        note += " (it was about to start: it starts and ends as aborted)"
    if waiting:
        note += f"; {waiting} queued message(s) run after it"
    return note
