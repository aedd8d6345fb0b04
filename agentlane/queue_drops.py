"""Messages the queue policy drops (issue 19): their texts are kept, their senders told.

A message the session accepted and the cap policy later drops (`drop:old`, `drop:summarize`), or
the newcomer `drop:new` turns away after accepting it (a signal, or two sends in one workflow
task), is written to the session's transcript as a `dropped` marker with its full text (never
sent to the model: `activities/context/context_view.py` keeps only chat roles) and announced on
the session's event stream as `message_dropped`, naming its message id and what happened (it belongs
to no run: `run_id` is empty, as for `session_reset`); a session with a callback URL posts it as
a `message_dropped` webhook, from the delivery of the run in progress or of the next one (no run
starts before its drops are recorded).

The session workflow holds dropped messages only until the one local activity that records them
has run (`workflows/session.py`), so its state and history do not grow with a burst: one marker
per batch, and the texts themselves never in the marker (a local activity's input is not
recorded).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

from agentlane.queue_settings import DropPolicy

RECORD_DROPPED_MESSAGES = "record_dropped_messages"
# A burst is written in batches (each one marker event in the session's history) of at most
# this many texts and this many characters together (a payload well under Temporal's 2 MB).
DROP_BATCH = 200
DROP_BATCH_CHARS = 500_000


class DropFate(StrEnum):
    # Counted in the overflow summary of the next run's prompt (drop:summarize); the summary
    # lists the newest `cap` of them, one line each, and points here for the rest.
    SUMMARIZED = "summarized"
    # Dropped with no trace in any prompt (drop:old, drop:new).
    DROPPED = "dropped"


class DroppedMessage(BaseModel):
    seq: int
    # The transcript id the message would have had in a run's prompt; its marker derives from it.
    entry_id: str
    text: str
    message_id: str | None = None
    sender: str | None = None
    policy: DropPolicy
    cap: int
    fate: DropFate
    at: float


class RecordDropsInput(BaseModel):
    session_key: str
    items: list[DroppedMessage] = Field(default_factory=list)


class RecordDropsResult(BaseModel):
    written: int = 0


def dropped_entry_id(entry_id: str) -> str:
    return f"{entry_id}:dropped"


def drop_note(policy: DropPolicy, cap: int, fate: DropFate) -> str:
    """What happened to a dropped message, in the words a sender, the status and the transcript
    read."""
    why = f"dropped: the queue was full (cap {cap}, drop policy {policy.value})"
    if fate == DropFate.SUMMARIZED:
        return why + "; counted in the next run's overflow summary; full text in the transcript"
    return why + "; full text in the transcript"
