"""Input of the workflow that hosts a session's event stream."""

from __future__ import annotations

from pydantic import BaseModel
from temporalio.contrib.workflow_streams import WorkflowStreamState

# A stream segment continues as new after this many history events or this many bytes of
# history, whichever comes first: far below Temporal's suggestion (4 096 events, ~4 MB), so a
# replay of a segment (after a worker restart or a failed task) takes well under a second.
ROLLOVER_EVENTS = 1_000
ROLLOVER_BYTES = 256 * 1024
# The items carried into the next segment take at most this many bytes (on the wire), so the
# hand-over input stays small and below the payload offload threshold (it is never written to
# the data dir); older items are truncated (their content is in the transcript).
CARRY_BYTES = 48 * 1024


class EventsInput(BaseModel):
    session_key: str
    stream_state: WorkflowStreamState | None = None
    # Items kept when the stream continues as new (at most; `carry_bytes` bounds them too).
    keep_items: int = 1000
    continue_as_new_after_events: int | None = None
    # None: the defaults above (tests lower them).
    continue_as_new_after_bytes: int | None = None
    carry_bytes: int | None = None
