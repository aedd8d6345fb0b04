"""How one pass of the run loop ends: a termination reason and error, or a hand-over to the
next continue-as-new segment."""

from __future__ import annotations

from dataclasses import dataclass

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agentlane.run import ExecutionError, TerminationReason


@dataclass
class LoopEnd:
    reason: TerminationReason | None = None
    error: ExecutionError | None = None
    continue_as_new: bool = False
    # How finish_run answers calls left open, when not the default "run stopped".
    unanswered: str | None = None
