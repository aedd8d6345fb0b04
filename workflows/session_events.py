"""SessionEventsWorkflow: hosts one session's Workflow Stream, and nothing else.

Streams cost history (every publish batch is a signal, every subscriber poll an update), so the
stream lives in its own workflow: its growth never crowds the session's or a run's history. It
truncates old items and continues as new on its own when Temporal suggests it; subscribers follow
the chain (the SDK's subscriber does that).
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream

with workflow.unsafe.imports_passed_through():
    from agentlane.event_stream import EventsInput


@workflow.defn(name="SessionEventsWorkflow")
class SessionEventsWorkflow:
    @workflow.init
    def __init__(self, inp: EventsInput) -> None:
        self.stream = WorkflowStream(prior_state=inp.stream_state)
        self.closing = False

    @workflow.signal
    def close(self) -> None:
        self.closing = True

    def _rollover_due(self, inp: EventsInput) -> bool:
        info = workflow.info()
        limit = inp.continue_as_new_after_events
        if limit is not None and info.get_current_history_length() >= limit:
            return True
        return info.is_continue_as_new_suggested()

    @workflow.run
    async def run(self, inp: EventsInput) -> None:
        await workflow.wait_condition(lambda: self.closing or self._rollover_due(inp))
        if self.closing:
            return
        state = self.stream.get_state()
        end = state.base_offset + len(state.log)
        self.stream.truncate(max(state.base_offset, end - inp.keep_items))
        await self.stream.continue_as_new(lambda s: [inp.model_copy(update={"stream_state": s})])
