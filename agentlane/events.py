"""Events published to a session's Workflow Stream (seed 001 §9.2 lifecycle events).

One flat model rather than a union keeps the stream single-typed and easy to consume from any
language; `kind` says which fields are set. `event_id` is stable across retries so a consumer can
drop a re-published event; text deltas carry `index` (character position within the message) so
a retried attempt that re-sends the same prefix is recognisable.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from agentlane.usage import Usage

EVENTS_TOPIC = "events"


class EventKind(StrEnum):
    AGENT_START = "agent_start"
    TURN_START = "turn_start"
    MESSAGE_START = "message_start"
    TEXT_DELTA = "text_delta"
    REASONING_DELTA = "reasoning_delta"
    BLOCK_REPLY = "block_reply"
    MESSAGE_RESET = "message_reset"
    TOOL_EXECUTION_START = "tool_execution_start"
    TOOL_EXECUTION_UPDATE = "tool_execution_update"
    TOOL_EXECUTION_END = "tool_execution_end"
    MESSAGE_END = "message_end"
    TURN_END = "turn_end"
    AGENT_END = "agent_end"
    ERROR = "error"
    # Tool-loop detection warned about, or blocked, a tool call (SPEC §14).
    TOOL_LOOP = "tool_loop"
    # Something the user should know that does not stop the run (e.g. a small context window).
    WARNING = "warning"
    # The context is being compacted (data: trigger, attempt, tokens_before) and was compacted
    # or not (data: outcome, tokens_before, tokens_after, will_retry).
    COMPACTION_START = "compaction_start"
    COMPACTION_END = "compaction_end"
    # The session was reset: later runs start afresh (data: entry_id of the reset marker).
    SESSION_RESET = "session_reset"
    # Events of this run that never reached the stream (their worker was killed before it sent
    # them): data `missing` (event ids) and `entries` (transcript entries to re-read).
    STREAM_GAP = "stream_gap"
    # The queue policy dropped an accepted message (issue 19): `data` names its seq, message id,
    # fate, policy and cap, and its transcript entry; it belongs to no run (`run_id` empty).
    MESSAGE_DROPPED = "message_dropped"
    # A tool call waits for a person's yes (issue 21): data names the approval id, the tool,
    # an args preview, when it expires and what expiry does.
    APPROVAL_REQUESTED = "approval_requested"
    # It was decided or ended: data `outcome` approved / denied / expired / cancelled, `reason`.
    APPROVAL_DECIDED = "approval_decided"


class AgentEvent(BaseModel):
    kind: EventKind
    event_id: str
    session_key: str
    run_id: str
    attempt: int = 1
    ts: float = 0.0
    turn_index: int | None = None
    message_id: str | None = None
    text: str | None = None
    index: int | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    summary: str | None = None
    success: bool | None = None
    duration_ms: int | None = None
    stop_reason: str | None = None
    usage: Usage | None = None
    termination_reason: str | None = None
    has_tool_calls: bool | None = None
    recoverable: bool | None = None
    data: dict[str, Any] = Field(default_factory=dict)


def lifecycle_event_id(run_id: str, kind: EventKind, turn_index: int | None = None) -> str:
    return f"{run_id}/{kind.value}" + ("" if turn_index is None else f"/{turn_index}")


class Announcement(BaseModel):
    """A lifecycle event as the run workflow decides it: the activity that carries it to the
    stream fills in the session, run and stable id. Kept small because it rides in activity
    inputs, and so in history."""

    kind: EventKind
    # None: stamped when the activity publishes it (turn events, whose time the next activity
    # knows as well as the workflow, leave it out to keep step inputs small).
    ts: float | None = None
    turn_index: int | None = None
    has_tool_calls: bool | None = None
    termination_reason: str | None = None
    text: str | None = None
    recoverable: bool | None = None
    data: dict[str, Any] = Field(default_factory=dict)

    def _id_suffix(self) -> str:
        # A turn can hold several of some events (one per tool call): the call names them; a
        # run's warnings are numbered.
        if "tool_call_id" in self.data:
            return f"/{self.data['tool_call_id']}"
        if self.kind == EventKind.WARNING and "n" in self.data:
            return f"/{self.data['n']}"
        if "compaction" in self.data:  # a run can compact several times
            return f"/{self.data['compaction']}"
        return ""

    def to_event(self, session_key: str, run_id: str) -> AgentEvent:
        return AgentEvent(
            # A turn can hold several of some events (one per tool call): the call names them.
            event_id=lifecycle_event_id(run_id, self.kind, self.turn_index) + self._id_suffix(),
            session_key=session_key,
            run_id=run_id,
            **self.model_dump(exclude_none=True),
        )


def turn_boundary(turn_index: int, close_turn: bool | None, open_turn: bool) -> list[Announcement]:
    """The turn events a model call publishes after its announcements: `turn_end` of the previous
    turn when `close_turn` is set (its value: whether that turn had tool calls), then
    `turn_start` of its own turn."""
    out: list[Announcement] = []
    if close_turn is not None:
        out.append(
            Announcement(
                kind=EventKind.TURN_END, turn_index=turn_index - 1, has_tool_calls=close_turn
            )
        )
    if open_turn:
        out.append(Announcement(kind=EventKind.TURN_START, turn_index=turn_index))
    return out
