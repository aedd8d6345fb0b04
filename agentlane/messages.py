"""What a chat adapter, the CLI or cron sends to a session, and what it gets back."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

# Re-exported: callers have always found the modes here.
from agentlane.entry_source import EntrySource
from agentlane.queue_modes import QueueMode, UnknownQueueMode, parse_queue_mode
from agentlane.queue_settings import QueueOptions
from agentlane.reasoning_modes import reasoning_mode_problem
from agentlane.thinking_levels import THINKING_LEVELS, normalize_thinking_level
from agentlane.webhooks import check_callback_url, check_secret_ref

__all__ = ["QueueMode", "UnknownQueueMode", "parse_queue_mode", "QueueOptions"]

MAX_MESSAGE_CHARS = 100_000
# The short fields of a message (routing, sender, ids) end up in search attributes (the
# channel) and in every receipt; Temporal refuses a search attribute value over 2 KB by default
# (`limit.searchAttributesSizeOfValue`), so each is held to that before any workflow call.
MAX_FIELD_BYTES = 2048
MAX_WORKSPACE_CHARS = 4096
_SHORT_FIELDS = ("mode", "message_id", "sender", "agent_id")
_ROUTING_FIELDS = ("channel", "to", "account", "thread", "callback_url", "callback_secret_ref")


# The id a client gives a message sent without one (clients/api.py): it makes a retry of the
# same send a duplicate, but it is no channel's message id, so `dedupe:prompt` still compares
# such a message by its text (SPEC §17.4: "without a message id").
CLIENT_MESSAGE_ID_PREFIX = "client-"


# What a session answers a message that arrives while it ends (its queue drained after a
# close): the client waits for the end and sends again, which opens the session anew.
SESSION_ENDING = "the session is ending (closed, its queue drained)"


class Routing(BaseModel):
    """Where a message came from and where replies go (channel, recipient, thread)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    channel: str | None = None
    to: str | None = None
    account: str | None = None
    thread: str | None = None
    # Webhook delivery (issue 11, agentlane/webhooks.py): where the session POSTs its replies
    # from this message on, and the reference of the secret that signs them (never the secret).
    callback_url: str | None = None
    callback_secret_ref: str | None = None

    @field_validator("callback_url")
    @classmethod
    def _callback_url(cls, url: str | None) -> str | None:
        return None if url is None else check_callback_url(url)

    @field_validator("callback_secret_ref")
    @classmethod
    def _secret_ref(cls, ref: str | None) -> str | None:
        return None if ref is None else check_secret_ref(ref)


class ModelSwitch(BaseModel):
    """The model a message names, as the client resolved it from the configuration (which the
    session's workflow cannot read): the session's model from that message on."""

    provider: str
    model: str
    context_window: int
    context_window_source: str = "model"


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
    # Queue settings for this message alone (SPEC §17.2 "inline"); `mode` above is its mode.
    queue: QueueOptions | None = None
    # What sent it: the run it starts carries this (a schedule's firing sends `cron`).
    source: EntrySource = EntrySource.CHAT
    thinking: str | None = Field(
        default=None,
        description="the session's thinking level from this message on: off, minimal, low, "
        "medium, high, xhigh or adaptive (or a word for one, e.g. max); none keeps the level",
    )
    reasoning: str | None = Field(
        default=None,
        description="what the session shows of the model's reasoning from this message on: "
        "off (hidden), on (one block_reply of its own, before the answer's blocks) or stream "
        "(reasoning_delta events as it comes); none keeps the session's",
    )

    @field_validator("reasoning")
    @classmethod
    def _reasoning_word(cls, word: str | None) -> str | None:
        # As thinking levels are: `Stream` and ` on ` are the modes they name.
        return word.strip().lower() if word is not None else None

    # Who sent it through Temporal (the client's identity: "agentlane-cli ann@box", "gateway
    # token ops"): an interrupt it causes says so. Filled in by the client.
    by: str | None = Field(default=None, max_length=200)
    # The model it names (`send(model=...)`), resolved by the client; None keeps the session's.
    switch_model: ModelSwitch | None = None


def _fields(msg: InboundMessage) -> list[tuple[str, str | None]]:
    return [
        ("text", msg.text),
        ("workspace", msg.workspace),
        *((name, getattr(msg, name)) for name in _SHORT_FIELDS),
        *((f"routing.{name}", getattr(msg.routing, name)) for name in _ROUTING_FIELDS),
    ]


def check_fields(msg: InboundMessage) -> None:
    """No NUL byte anywhere (no path, search attribute or store takes one) and no short field
    over its size limit: refused with the field's name before anything is tried."""
    for name, value in _fields(msg):
        if value is None:
            continue
        if "\x00" in value:
            raise ValueError(
                f"{name} contains a NUL byte (\\0) at character {value.index(chr(0))}; remove it"
            )
        if name == "text":
            continue
        if name == "workspace":
            if len(value) > MAX_WORKSPACE_CHARS:
                raise ValueError(
                    f"workspace is {len(value)} characters; the limit is {MAX_WORKSPACE_CHARS}"
                )
            continue
        size = len(value.encode("utf-8", "surrogatepass"))
        if size > MAX_FIELD_BYTES:
            raise ValueError(
                f"{name} is {size} bytes; the limit is {MAX_FIELD_BYTES} (it is stored as a "
                "search attribute or in every receipt): send an id, not content"
            )


def check_inbound(msg: InboundMessage) -> None:
    """Reject what no session can take, with a message that says why (the session's validator
    and the client share it, so a client can refuse before any round trip)."""
    check_fields(msg)
    if not msg.text.strip():
        raise ValueError("message text is empty")
    try:
        msg.text.encode("utf-8")
    except UnicodeEncodeError as err:
        # What a terminal's invalid bytes become in Python's argv (lone surrogates).
        raise ValueError(
            f"the message is not valid UTF-8 (a byte that is not text at character {err.start})"
        ) from None
    if len(msg.text) > MAX_MESSAGE_CHARS:
        raise ValueError(
            f"message is {len(msg.text)} characters; the limit is {MAX_MESSAGE_CHARS}. "
            "Put large content in a workspace file and refer to it."
        )
    if msg.mode is not None:
        parse_queue_mode(msg.mode)
    if msg.routing.callback_secret_ref is not None and msg.routing.callback_url is None:
        raise ValueError("routing names a callback secret but no callback_url")
    if msg.thinking is not None and normalize_thinking_level(msg.thinking) is None:
        raise ValueError(
            f"thinking level {msg.thinking!r} is not one of {', '.join(THINKING_LEVELS)}"
        )
    why = reasoning_mode_problem(msg.reasoning) if msg.reasoning is not None else None
    if why is not None:
        raise ValueError(why)


class FateState(StrEnum):
    PENDING = "pending"  # accepted and waiting in the queue
    STARTED = "started"  # a run took it as (part of) its prompt
    STEERED = "steered"  # steered into a run that was already going
    DUPLICATE = "duplicate"  # a redelivery of a message already received
    DROPPED = "dropped"  # dropped by the queue's cap policy; its text in the transcript
    FAILED = "failed"  # its runs kept ending abnormally; given up after the retry limit
    FORGOTTEN = "forgotten"  # settled long ago; the session no longer keeps what became of it


class MessageFate(BaseModel):
    """What became of one accepted message (`wait_started` answers with it)."""

    seq: int
    state: FateState
    run_id: str | None = None
    note: str = ""
    message_id: str | None = None
    # For a duplicate: the number of the message it repeats (`wait_started` follows it).
    duplicate_of: int | None = None
    # When it got this fate (workflow time): how long a session keeps it.
    at: float | None = None


class SendDisposition(StrEnum):
    STARTED = "started"  # the session was idle: its run starts now
    QUEUED = "queued"
    STEERED = "steered"
    INTERRUPTED = "interrupted"
    DUPLICATE = "duplicate"
    # The queue was full and its policy (`drop:new`) turned the message away; its text is kept
    # in the transcript as a `dropped` entry.
    DROPPED = "dropped"


class SendReceipt(BaseModel):
    session_key: str
    message_seq: int
    disposition: SendDisposition
    mode: QueueMode
    run_id: str | None = None
    queue_length: int = 0
    note: str = ""
    # For a duplicate: the message it repeats, and what became of that one.
    duplicate_of: int | None = None
    original: MessageFate | None = None


class AbortRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = "user abort"
    # Who asked (the client's identity); the run's result and its page say "aborted by …".
    by: str | None = Field(default=None, max_length=200)


class AbortReceipt(BaseModel):
    """What an abort found: the run it stops, or nothing to abort."""

    session_key: str
    run_id: str | None = None
    queue_length: int = 0
    note: str = ""
