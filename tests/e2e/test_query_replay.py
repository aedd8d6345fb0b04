"""Queries answered by replaying history from scratch (a worker that caches no workflow, as after
an eviction): a run with tool calls answers `progress` at every point of its life, never with a
nondeterminism error (workflow.patched calls are made where a replay makes them too)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from temporalio.client import WorkflowQueryFailedError

from agentlane.ids import run_workflow_id
from agentlane.run import ExecutionStatus
from clients.api import AgentlaneClient
from tests.conftest import make_deployment, settings_for
from tests.e2e.test_control import fast_loop
from workflows.agent_run import AgentRunWorkflow


async def test_progress_queries_replayed_from_scratch_during_runs_with_tools(
    server: object, tmp_path: Path
) -> None:
    dep = make_deployment(server, tmp_path, AGENTLANE_MAX_CACHED_WORKFLOWS="0")
    ws = tmp_path / "ws"
    ws.mkdir()
    dep.start_worker()
    try:
        client = await AgentlaneClient.connect(settings_for(dep))
        failures: list[str] = []
        answers = 0
        for _ in range(2):
            key = f"qr-{uuid.uuid4().hex[:8]}"
            receipt = await client.send(key, fast_loop(8), workspace=str(ws))
            fate = await asyncio.wait_for(client.wait_started(key, 1), 60)
            run_id = fate.run_id or ""
            assert run_id == run_workflow_id(key, 1)
            handle = client.client.get_workflow_handle(run_id)
            done = asyncio.ensure_future(client.wait_for_run(run_id))
            while not done.done():
                try:
                    await handle.query(AgentRunWorkflow.progress)
                    answers += 1
                except WorkflowQueryFailedError as err:
                    failures.append(str(err))
                await asyncio.sleep(0.01)
            result = await done
            assert result.status == ExecutionStatus.SUCCESS, result
            assert receipt.message_seq == 1
        assert answers > 10
        assert failures == []
    finally:
        dep.stop_workers()
