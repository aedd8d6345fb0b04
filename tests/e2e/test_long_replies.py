"""A long reply from the offline model at zero latency (a load test's, a demo's `count to N`):
the model call streams it in one attempt, and the worker's event loop keeps serving heartbeats
meanwhile."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from temporalio.api.enums.v1 import EventType

from agentlane.events import EventKind
from agentlane.run import ExecutionStatus
from clients.api import AgentlaneClient


async def test_a_long_zero_latency_reply_is_one_model_call_attempt(
    client: AgentlaneClient, workspace: Path
) -> None:
    """Review R F-R2: the offline model yielded 200 000 tokens without letting the loop run:
    no heartbeat went out, the call was timed out and made again (five attempts), and the
    stream got stray `agent_start`s republished after the reply."""
    key = f"long-{uuid.uuid4().hex[:8]}"
    receipt = await client.send_and_start(key, "count to 100000", workspace=str(workspace))
    assert receipt.run_id
    result = await asyncio.wait_for(client.wait_for_run(receipt.run_id), 180)
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert result.reply.rstrip().endswith("100000")
    attempts = [
        e.activity_task_started_event_attributes.attempt
        async for e in client.client.get_workflow_handle(receipt.run_id).fetch_history_events()
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    assert attempts and set(attempts) == {1}, attempts
    starts = [
        item.offset
        async for item in client.read_events(key, 0)
        if item.event.kind == EventKind.AGENT_START and item.event.run_id == receipt.run_id
    ]
    # The stream keeps a bounded tail of a reply this long: the run's start may have left it,
    # but it is never there twice (republished after the reply).
    assert len(starts) <= 1, starts
