"""Which transcript entries make up a branch (issue 10; seed 001 §9.7). Pure: no I/O.

A session's transcript file is linear and only appended to; `reset` markers split it into
branches (`activities/context/context_view.py`: a request sees nothing before the latest reset).
So the branch that leads to an entry is the run of entries from the reset before it (or the
start of the file) up to and including it. Copying exactly that run into a new session, with the
compaction and truncation markers on it, gives the new session the view the parent had at that
entry; entries of other branches (before that reset, or after the entry) are not copied.
"""

from __future__ import annotations

from collections.abc import Sequence

from activities.context.context_view import branch_start
from agentlane.branches import ResetMark
from agentlane.transcript import Role, TranscriptEntry


class UnknownEntry(ValueError):
    """The entry id is not in the session's transcript."""


def index_of(entries: Sequence[TranscriptEntry], entry_id: str) -> int:
    for index, entry in enumerate(entries):
        if entry.id == entry_id:
            return index
    raise UnknownEntry(entry_id)


def branch_path(entries: Sequence[TranscriptEntry], entry_id: str) -> list[TranscriptEntry]:
    """The entries of the branch that leads to `entry_id`, up to and including it.

    Branching from a reset marker itself gives just that marker: a fresh context. A dropped
    message's entry is written when the queue drops it, which can be while a tool call runs:
    the branch from it takes the results of the calls open there, which had run in the parent
    (without them the copy would tell the model a command that ran was not executed)."""
    end = _past_open_results(entries, index_of(entries, entry_id))
    start = min(branch_start(entries[: end + 1]), end)
    path = list(entries[start : end + 1])
    if path and path[0].parent_id is not None:
        # Its parent is on another branch, or in another session: in the copy it is the root.
        path[0] = path[0].model_copy(update={"parent_id": None})
    return path


def _past_open_results(entries: Sequence[TranscriptEntry], end: int) -> int:
    """`end`, or for a dropped entry inside a tool exchange the index of the exchange's last
    result (dropped entries between the results come with them)."""
    if entries[end].role != Role.DROPPED:
        return end
    open_calls = {call_id for call_id, _ in unanswered_calls(entries[: end + 1])}
    index = end
    while open_calls and index + 1 < len(entries):
        following = entries[index + 1]
        if following.role == Role.TOOL and following.tool_call_id in open_calls:
            open_calls.discard(following.tool_call_id)
        elif following.role != Role.DROPPED:
            break
        index += 1
    # Dropped entries after the last result stay out: the branch point was before them.
    while index > end and entries[index].role == Role.DROPPED:
        index -= 1
    return index


def unanswered_calls(path: Sequence[TranscriptEntry]) -> list[tuple[str, str]]:
    """Tool calls on `path` without a result on it (id, tool name): a branch point between a call
    and its result. The copy answers them, so the new session's transcript stays valid."""
    answered = {e.tool_call_id for e in path if e.role == Role.TOOL and e.tool_call_id}
    return [
        (call.id, call.name)
        for entry in path
        if entry.role == Role.ASSISTANT
        for call in entry.tool_calls
        if call.id not in answered
    ]


def resets_of(entries: Sequence[TranscriptEntry]) -> list[ResetMark]:
    """The session's resets, oldest first, each with the entry its old branch ended at."""
    marks: list[ResetMark] = []
    for entry in entries:
        if entry.role == Role.RESET:
            by = entry.meta.get("by")
            marks.append(
                ResetMark(
                    entry_id=entry.id,
                    ts=entry.ts,
                    after=entry.parent_id,
                    by=str(by) if by is not None else None,
                )
            )
    return marks


def current_branch(
    entries: Sequence[TranscriptEntry],
) -> tuple[int, list[TranscriptEntry]]:
    """(entries hidden because they precede the latest reset, the current branch). The reset
    marker itself is part of the current branch: it is where the branch starts."""
    start = branch_start(entries)
    shown_from = max(start - 1, 0)
    return shown_from, list(entries[shown_from:])
