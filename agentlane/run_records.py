"""Contract of the activity that closes a run: answers what was left open, publishes the final
lifecycle events and records the run in the store."""

from __future__ import annotations

from pydantic import Field

from agentlane.events import Announcement
from agentlane.run import ExecutionResult, UserTurn
from agentlane.usage import RunUsage
from agentlane.wire import CompactModel

FINISH_RUN = "finish_run"


def engine_task_queue(workflow_task_queue: str) -> str:
    """The queue of the engine's own bookkeeping activities (a run's finish): slots of their
    own, so long tool calls holding the workflow queue's slots do not hold up every run's end."""
    return f"{workflow_task_queue}-engine"


class FinishRunInput(CompactModel):
    result: ExecutionResult
    unanswered_reason: str
    announce: list[Announcement] = Field(default_factory=list)
    # The prompt of a run that stopped before its first model call: it still reaches the
    # transcript (every accepted message does), answered by the run's end.
    append_user: list[UserTurn] = Field(default_factory=list)
    # Whether `announce` holds events an activity was handed before (a model call that failed
    # may have published some): only then is the stream read back for them. None: a run of an
    # older version, which did not say (read back).
    recheck_announce: bool | None = None


class FinishRunResult(CompactModel):
    reply: str = ""


# What a run that ended without a result (terminated, timed out in Temporal) had spent, read
# from its transcript: its model calls count in its session's totals all the same.
RUN_SPENT = "run_spent"


class RunSpentInput(CompactModel):
    session_key: str
    run_id: str


class RunSpent(CompactModel):
    turns: int = 0
    usage: RunUsage = RunUsage()
