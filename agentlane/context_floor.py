"""Where a session's live context starts in its transcript: its floor (issue 26).

A model request is built only from the entries `activities/context/context_view.py`
`context_entries` reads: those from the latest reset on and, when a compaction follows it, the
compaction marker, the turn-start user message it keeps (`meta["turn_start_id"]`) and every
entry from its first kept one (`meta["first_kept_id"]`) on. Nothing before the floor can reach
a request again, so a reader may start there instead of at the session's first entry, and a
cost that grew with the session's age stays the size of its live context.

Truncation markers before the floor need not be read: a truncation names tool results that
existed when it was written, so every entry it names precedes it, and so precedes the floor.

Pure: the store computes the floor when it appends a reset or compaction marker (by sequence
number), the transcript cache over the entries it holds (by position); both through
`marker_floor`, so they agree. Shared by `store/` and `activities/`, hence here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agentlane.transcript import Role, TranscriptEntry

# The markers that move the floor.
FLOOR_ROLES = frozenset({Role.RESET, Role.COMPACTION})


def marker_floor(
    marker: TranscriptEntry, at: int, reset_at: int, position: Mapping[str, int]
) -> int:
    """The floor a reset or compaction marker sets: the first position a request can use.

    `at`: the marker's position (sequence number or index); `reset_at`: the latest reset's
    before it (or anything below the first position when there is none); `position`: where
    the entries the compaction names are (absent ids are not found, as in `context_entries`,
    which looks for them only between the reset and the marker). A reset keeps itself: the
    window then always holds the session's last entry.
    """
    if marker.role == Role.RESET:
        return at
    if marker.role != Role.COMPACTION:
        raise ValueError(f"a {marker.role.value} entry sets no context floor")

    def found(name: str) -> int | None:
        value = marker.meta.get(name)
        where = position.get(str(value)) if value else None
        return where if where is not None and reset_at < where < at else None

    first = found("first_kept_id")
    kept_from = at + 1 if first is None else first
    turn = found("turn_start_id")
    candidates = [at, kept_from]
    if turn is not None and turn < kept_from:
        candidates.append(turn)
    return min(candidates)


def context_floor(entries: Sequence[TranscriptEntry]) -> int:
    """The index in `entries` (a transcript, or a suffix of one that starts at or below its
    floor) from which `context_entries` reads the same as from the whole list."""
    reset_at = -1
    for index in range(len(entries) - 1, -1, -1):
        if entries[index].role == Role.RESET:
            reset_at = index
            break
    compaction_at = None
    for index in range(len(entries) - 1, reset_at, -1):
        if entries[index].role == Role.COMPACTION:
            compaction_at = index
            break
    if compaction_at is None:
        return max(reset_at, 0)
    marker = entries[compaction_at]
    names = {marker.meta.get("first_kept_id"), marker.meta.get("turn_start_id")}
    position = {
        entries[i].id: i for i in range(reset_at + 1, compaction_at) if entries[i].id in names
    }
    return marker_floor(marker, compaction_at, reset_at, position)
