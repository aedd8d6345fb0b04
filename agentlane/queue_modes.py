"""Queue modes and their names (SPEC §17.1)."""

from __future__ import annotations

from enum import StrEnum


class QueueMode(StrEnum):
    """What happens to a message that arrives while the session's run is busy (SPEC §17.1)."""

    STEER = "steer"
    FOLLOWUP = "followup"
    COLLECT = "collect"
    STEER_BACKLOG = "steer-backlog"
    INTERRUPT = "interrupt"


# SPEC §17.1: "queue" is the legacy name of steer.
_MODE_ALIASES = {
    "queue": QueueMode.STEER,
    "queued": QueueMode.STEER,
    "steering": QueueMode.STEER,
    "interrupts": QueueMode.INTERRUPT,
    "abort": QueueMode.INTERRUPT,
    "follow-ups": QueueMode.FOLLOWUP,
    "followups": QueueMode.FOLLOWUP,
    "follow-up": QueueMode.FOLLOWUP,
    "coalesce": QueueMode.COLLECT,
    "steer+backlog": QueueMode.STEER_BACKLOG,
    "steer_backlog": QueueMode.STEER_BACKLOG,
}


class UnknownQueueMode(ValueError):
    pass


def parse_queue_mode(raw: str) -> QueueMode:
    """Normalise a user-typed mode name; unknown names are an error, never a silent default."""
    word = raw.strip().lower()
    try:
        return QueueMode(word)
    except ValueError:
        pass
    if word in _MODE_ALIASES:
        return _MODE_ALIASES[word]
    valid = ", ".join(m.value for m in QueueMode)
    raise UnknownQueueMode(f"unknown queue mode {raw!r}; valid modes: {valid}")
