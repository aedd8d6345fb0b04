"""Contract of the activity that closes a run: answers what was left open, publishes the final
lifecycle events and records the run in the store."""

from __future__ import annotations

from pydantic import Field

from agentlane.events import Announcement
from agentlane.run import ExecutionResult, UserTurn
from agentlane.wire import CompactModel

FINISH_RUN = "finish_run"


class FinishRunInput(CompactModel):
    result: ExecutionResult
    unanswered_reason: str
    announce: list[Announcement] = Field(default_factory=list)
    # The prompt of a run that stopped before its first model call: it still reaches the
    # transcript (every accepted message does), answered by the run's end.
    append_user: list[UserTurn] = Field(default_factory=list)


class FinishRunResult(CompactModel):
    reply: str = ""
