"""Contract of the activity that closes a run: answers what was left open, publishes the final
lifecycle events and records the run in the store."""

from __future__ import annotations

from pydantic import BaseModel, Field

from agentlane.events import AgentEvent
from agentlane.run import ExecutionResult

FINISH_RUN = "finish_run"


class FinishRunInput(BaseModel):
    result: ExecutionResult
    unanswered_reason: str
    announce: list[AgentEvent] = Field(default_factory=list)


class FinishRunResult(BaseModel):
    reply: str = ""
