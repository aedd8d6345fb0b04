"""Contract of the activity that keeps a session's settings beside its transcript, so a session
that was closed and is reopened by a new message keeps its model, workspace, thinking and queue
settings, and its event stream's offsets go on from where the last incarnation stopped."""

from __future__ import annotations

from pydantic import BaseModel, Field

from agentlane.queue_settings import DedupeEntry, QueueOptions
from agentlane.session import BranchSource, SessionSettings
from agentlane.usage import Usage

RESTORE_SESSION = "restore_session"
RECORD_SESSION = "record_session"


class SessionTotals(BaseModel):
    """What a session's runs added up to: a reopened session goes on counting from there, as
    its run numbers do."""

    turns: int = 0
    usage: Usage = Usage()
    dropped_messages: int = 0


class RestoreSessionInput(BaseModel):
    key: str
    settings: SessionSettings
    queue_override: QueueOptions | None = None
    # Settings the opening message named itself (`SessionSettings` field names): they win over
    # the recorded ones.
    explicit: list[str] = Field(default_factory=list)


class RestoredSession(BaseModel):
    settings: SessionSettings
    queue_override: QueueOptions | None = None
    # Where the previous incarnation's event stream ended (0 for a new key).
    events_offset: int = 0
    reopened: bool = False
    # Runs earlier incarnations numbered: run ids go on from there (never reused).
    run_count: int = 0
    # Where the key was branched from, if it was (a reopened branch keeps its place in the tree).
    branch: BranchSource | None = None
    # The totals an earlier incarnation recorded (None: none recorded).
    totals: SessionTotals | None = None
    # Message ids it accepted lately: a redelivery across a close is still a duplicate.
    recent_ids: list[DedupeEntry] = Field(default_factory=list)


class RecordSessionInput(BaseModel):
    key: str
    settings: SessionSettings
    queue_override: QueueOptions | None = None
    run_count: int = 0
    totals: SessionTotals | None = None
    recent_ids: list[DedupeEntry] = Field(default_factory=list)
