"""What a chat adapter, the CLI or cron sends to a session, and what it gets back."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

MAX_MESSAGE_CHARS = 100_000


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


class Routing(BaseModel):
    """Where a message came from and where replies go (channel, recipient, thread)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    channel: str | None = None
    to: str | None = None
    account: str | None = None
    thread: str | None = None


class InboundMessage(BaseModel):
    """A user message for a session. Unknown fields are rejected, not ignored."""

    model_config = ConfigDict(extra="forbid")

    text: str
    mode: str | None = None
    message_id: str | None = Field(default=None, description="provider message id, for dedupe")
    routing: Routing = Routing()
    sender: str | None = None
    workspace: str | None = Field(
        default=None, description="workspace folder; only honoured when the session is created"
    )
    agent_id: str = "main"


class SendDisposition(StrEnum):
    STARTED = "started"
    QUEUED = "queued"
    STEERED = "steered"
    INTERRUPTED = "interrupted"
    DUPLICATE = "duplicate"


class SendReceipt(BaseModel):
    session_key: str
    message_seq: int
    disposition: SendDisposition
    mode: QueueMode
    run_id: str | None = None
    queue_length: int = 0
    note: str = ""


class AbortRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = "user abort"
