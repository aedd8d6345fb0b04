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


def check_inbound(msg: InboundMessage) -> None:
    """Reject what no session can take, with a message that says why (the session's validator
    and the client share it, so a client can refuse before any round trip)."""
    if not msg.text.strip():
        raise ValueError("message text is empty")
    if len(msg.text) > MAX_MESSAGE_CHARS:
        raise ValueError(
            f"message is {len(msg.text)} characters; the limit is {MAX_MESSAGE_CHARS}. "
            "Put large content in a workspace file and refer to it."
        )
    if msg.mode is not None:
        parse_queue_mode(msg.mode)


class SendDisposition(StrEnum):
    STARTED = "started"  # the session was idle: its run starts now
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


class AbortReceipt(BaseModel):
    """What an abort found: the run it stops, or nothing to abort."""

    session_key: str
    run_id: str | None = None
    queue_length: int = 0
    note: str = ""


class FateState(StrEnum):
    PENDING = "pending"  # accepted and waiting in the queue
    STARTED = "started"  # a run took it as (part of) its prompt
    STEERED = "steered"  # steered into a run that was already going
    DUPLICATE = "duplicate"  # a redelivery of a message already received
    DROPPED = "dropped"  # dropped by the queue's cap policy; in the overflow summary
    FAILED = "failed"  # its runs kept ending abnormally; given up after the retry limit


class MessageFate(BaseModel):
    """What became of one accepted message (`wait_started` answers with it)."""

    seq: int
    state: FateState
    run_id: str | None = None
    note: str = ""
