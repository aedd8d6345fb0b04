"""Input of the workflow that hosts a session's event stream."""

from __future__ import annotations

import json

from pydantic import BaseModel
from temporalio.api.common.v1 import Payload
from temporalio.contrib.workflow_streams import WorkflowStreamState

from agentlane.events import EventKind

# A stream segment continues as new after this many history events or this many bytes of
# history, whichever comes first: far below Temporal's suggestion (4 096 events, ~4 MB), so a
# replay of a segment (after a worker restart or a failed task) takes well under a second.
ROLLOVER_EVENTS = 1_000
ROLLOVER_BYTES = 512 * 1024
# The byte bound of segments begun before `REST_CARRY_BYTES` (their replay keeps it).
ROLLOVER_BYTES_BEFORE_REST_CARRY = 256 * 1024
# The items carried into the next segment take at most this many bytes (on the wire), so the
# hand-over input stays small and below the payload offload threshold (it is never written to
# the data dir); older items are truncated (their content is in the transcript). As large as
# that allows: a watcher that lags by less than this across a hand-over (a burst of a thousand
# dropped-message notices is ~300 KB) misses nothing.
CARRY_BYTES = 112 * 1024
# What a hand-over at a run's end carries: the run is over and its own check for missing events
# has read them, so only a watcher further behind than this misses anything; it resumes at the
# oldest item carried (the gateway sends it a `gap` event first). Carried state is written to
# history again at every hand-over: 112 KB there, every few runs, outweighed the runs' own events.
REST_CARRY_BYTES = 16 * 1024


class EventsInput(BaseModel):
    session_key: str
    stream_state: WorkflowStreamState | None = None
    # Items kept when the stream continues as new (at most; `carry_bytes` bounds them too).
    keep_items: int = 1000
    continue_as_new_after_events: int | None = None
    # None: the defaults above (tests lower them).
    continue_as_new_after_bytes: int | None = None
    carry_bytes: int | None = None
    # The code level of the workflow code that started it (workflows/patches.py); None: asked
    # with markers (started by older code).
    code: str | None = None


def ends_a_run(item: Payload) -> bool:
    """Whether a stream item is a run's `agent_end` (the stream's items are JSON payloads of
    `AgentEvent`)."""
    try:
        kind = json.loads(item.data).get("kind")
    except (ValueError, AttributeError):
        return False
    return bool(kind == EventKind.AGENT_END)
