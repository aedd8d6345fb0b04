"""Input of the workflow that hosts a session's event stream."""

from __future__ import annotations

from pydantic import BaseModel
from temporalio.contrib.workflow_streams import WorkflowStreamState


class EventsInput(BaseModel):
    session_key: str
    stream_state: WorkflowStreamState | None = None
    # Items kept when the stream continues as new; older ones are truncated (their content is
    # in the transcript).
    keep_items: int = 1000
    continue_as_new_after_events: int | None = None
