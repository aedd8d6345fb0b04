"""A watcher's poll that does not lose a second at the event stream's hand-over.

A session's events live in a chain of `SessionEventsWorkflow` runs: each continues as new at
its bounds (`workflows/session_events.py`). A poll that reaches the server while the closing
run's last workflow task is in flight is refused (`RESOURCE_EXHAUSTED`, "workflow operation can
not be applied because workflow is closing"), and the SDK's core retries a refusal of that kind
only after a fixed second (±20 %, its throttle policy; not configurable from Python). The
watcher then sees the next event, often a run's `agent_end`, a second late.

`HandOverAwareHandle` is the handle the stream client polls through. A poll that is not
accepted within `SLOW_ACCEPT_SECONDS` asks the server which run is the stream's latest (a
describe: no workflow task, no history); when that is no longer the run its polls reached so
far, the stream has handed over and the poll is sent again to the new run by its id. A poll
that is only slow (a busy server, a busy worker) is left to finish.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.client import WorkflowHandle, WorkflowUpdateHandle
from temporalio.service import RPCError

# Well above a poll's acceptance on a healthy server (a workflow task: milliseconds), well below
# the core's second.
SLOW_ACCEPT_SECONDS = 0.25


class HandOverAwareHandle(WorkflowHandle[Any, Any]):
    """A handle to the stream's workflow id (its latest run) for the stream client's polls."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The run the last accepted poll reached: the hand-over is a change of it.
        self.polled_run: str | None = None
        self.handed_over = 0  # polls sent again to a new run (tests and logs read it)

    async def start_update(self, *args: Any, **kwargs: Any) -> WorkflowUpdateHandle[Any]:
        call = asyncio.ensure_future(super().start_update(*args, **kwargs))
        try:
            while True:
                done, _ = await asyncio.wait({call}, timeout=SLOW_ACCEPT_SECONDS)
                if done:
                    return self._accepted(call.result())
                latest = await self._latest_run()
                if latest is not None and self.polled_run is not None and latest != self.polled_run:
                    break
        except BaseException:
            call.cancel()
            raise
        # Handed over: the call still waits out the core's second. Sent again to the new run
        # (the abandoned one, should it still get through, is a poll nobody reads: the stream
        # answers it once it has items, and it ends with the run). The SDK reports its
        # cancellation as an error of its own, read here so that it is not logged as lost.
        call.add_done_callback(_consume)
        call.cancel()
        self.handed_over += 1
        again = self._client.get_workflow_handle(self.id, run_id=latest)
        return self._accepted(await again.start_update(*args, **kwargs))

    def _accepted(self, update: WorkflowUpdateHandle[Any]) -> WorkflowUpdateHandle[Any]:
        self.polled_run = update.workflow_run_id or self.polled_run
        return update

    async def _latest_run(self) -> str | None:
        try:
            described = await self._client.get_workflow_handle(self.id).describe()
        except RPCError:
            return None  # not known now: keep waiting for the poll itself
        return described.run_id


def _consume(call: asyncio.Future[Any]) -> None:
    if not call.cancelled():
        call.exception()
