"""Continue-as-new of the run, the session and the event stream, with low thresholds."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentlane.run import ExecutionStatus
from clients.api import AgentlaneClient
from tests.e2e.support import assert_transcript_valid, collect, lifecycle_ok, wait_idle


async def chain_length(client: AgentlaneClient, workflow_id: str, at_least: int = 1) -> int:
    """Runs in the workflow's chain, as visibility lists them. Visibility is eventually
    consistent: a continue-as-new just before the check may not be listed yet, so wait (up to
    10 s) for `at_least` before answering."""
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        count = 0
        async for _ in client.client.list_workflows(f"WorkflowId = '{workflow_id}'"):
            count += 1
        if count >= at_least or asyncio.get_running_loop().time() > deadline:
            return count
        await asyncio.sleep(0.2)


async def test_run_session_and_stream_continue_as_new(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    overrides: dict[str, object] = {
        "run_continue_as_new_after_events": 25,
        "continue_as_new_after_events": 20,
        "events_continue_as_new_after_events": 25,
    }
    steps = " then ".join(f"write f{i}.txt with {i}" for i in range(8))
    receipt = await client.send_and_start(
        session_key,
        steps + " then count to 20",
        workspace=str(workspace),
        session_overrides=overrides,
    )
    assert receipt.run_id
    got = await collect(client, session_key, receipt.run_id)
    result = await client.wait_for_run(receipt.run_id)
    assert result.status == ExecutionStatus.SUCCESS
    assert result.tool_calls == 8 and result.turns == 9
    assert all((workspace / f"f{i}.txt").read_text() == str(i) for i in range(8))
    lifecycle_ok(got.events, receipt.run_id)
    assert got.visible == result.reply
    assert_transcript_valid(client.transcript(session_key))
    assert await chain_length(client, receipt.run_id, 3) >= 3
    assert await chain_length(client, f"session:{session_key}:events", 2) >= 2
    for i in range(3):
        more = await client.send_and_start(session_key, f"say again {i}")
        await wait_idle(client, session_key, runs=2 + i)
        assert more.disposition.value in ("started", "queued")
    assert await chain_length(client, f"session:{session_key}") >= 2
    status = await client.status(session_key)
    assert status.runs == 4 and status.turns == 12
    # Each keeps its task priority across continue-as-new (agentlane/task_priority.py): the
    # session's tasks first, then its stream's, then its runs'.
    for workflow_id, key in (
        (f"session:{session_key}", 1),
        (f"session:{session_key}:events", 2),
        (receipt.run_id, 3),
    ):
        described = await client.client.get_workflow_handle(workflow_id).describe()
        assert described.raw_description.workflow_execution_info.priority.priority_key == key


async def test_a_session_continues_as_new_by_history_bytes_by_default(
    client: AgentlaneClient, session_key: str, workspace: Path
) -> None:
    """No limit set: the session's history still stays bounded (256 KB,
    workflows/policy/history_rollover.py), long before Temporal's suggestion (4 MB)."""
    padding = "lorem ipsum " * 3000  # 36 KB in each message's update, so ~8 runs pass 256 KB
    sent = 10
    for i in range(sent):
        await client.send_and_start(
            session_key, f"say {i}. {padding}", workspace=str(workspace) if i == 0 else None
        )
        await wait_idle(client, session_key, runs=i + 1)
    assert await chain_length(client, f"session:{session_key}", 2) >= 2
    status = await client.status(session_key)
    assert status.runs == sent
    assert_transcript_valid(client.transcript(session_key))
