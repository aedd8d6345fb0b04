"""Queries answered by replaying history from scratch (a worker that caches one workflow, so a
session's three evict one another, as under a full cache): runs with tool calls answer `progress`
at every point of their life, never with a nondeterminism error (workflows/patches.py: a run's one
marker is asked first, before any local activity)."""

from __future__ import annotations

import asyncio
import re
import urllib.request
import uuid
from pathlib import Path

from temporalio.client import WorkflowQueryFailedError
from temporalio.service import RPCError

from agentlane.ids import run_workflow_id
from agentlane.run import ExecutionStatus
from clients.api import AgentlaneClient
from tests.conftest import make_deployment, settings_for
from tests.e2e.test_control import fast_loop
from tests.harness import devserver
from workflows.agent_run import AgentRunWorkflow

QUERIERS = 3
# As a watching UI does: a querier that never pauses only starves the run it asks.
QUERY_PAUSE = 0.02


def run_replays(metrics_address: str) -> int:
    """Workflow tasks of runs the worker replayed from the start, from the SDK's own metrics."""
    text = urllib.request.urlopen(f"http://{metrics_address}/metrics", timeout=10).read().decode()
    found = re.search(
        r'^temporal_workflow_task_replay_latency_count\{[^}]*workflow_type="AgentRunWorkflow"[^}]*\}'
        r" (\d+)",
        text,
        re.MULTILINE,
    )
    return int(found.group(1)) if found else 0


async def test_progress_queries_replayed_from_scratch_during_runs_with_tools(
    server: object, tmp_path: Path
) -> None:
    # No cache at all is no model of an eviction: the SDK then drops the task the server hands
    # back with a completion, and each such task waits out its 10 s timeout.
    metrics_address = f"127.0.0.1:{devserver.free_port()}"
    dep = make_deployment(
        server,
        tmp_path,
        AGENTLANE_MAX_CACHED_WORKFLOWS="1",
        AGENTLANE_METRICS_ADDRESS=metrics_address,
    )
    ws = tmp_path / "ws"
    ws.mkdir()
    dep.start_worker()
    failures: list[str] = []
    answers = 0

    async def query_until(run_id: str, done: asyncio.Future[object]) -> None:
        nonlocal answers
        handle = client.client.get_workflow_handle(run_id)
        while not done.done():
            try:
                await handle.query(AgentRunWorkflow.progress)
                answers += 1
                await asyncio.sleep(QUERY_PAUSE)
            except WorkflowQueryFailedError as err:
                failures.append(f"{run_id}: {err}")
            except RPCError:
                # The server buffers few queries for a workflow whose task is open, and a query
                # can time out on this loaded machine: ask again.
                await asyncio.sleep(0.05)

    async def one_session() -> None:
        key = f"qr-{uuid.uuid4().hex[:8]}"
        # 16 steps: on a loaded machine each answer is a replay from scratch, and an 8-step run
        # once ended after exactly 10 of them.
        await client.send(key, fast_loop(16), workspace=str(ws))
        fate = await asyncio.wait_for(client.wait_started(key, 1), 60)
        assert fate.run_id == run_workflow_id(key, 1)
        done = asyncio.ensure_future(client.wait_for_run(fate.run_id))
        await asyncio.gather(*(query_until(fate.run_id, done) for _ in range(QUERIERS)))
        assert (await done).status == ExecutionStatus.SUCCESS

    try:
        client = await AgentlaneClient.connect(settings_for(dep))
        await one_session()
        assert answers > 10
        assert failures == []
        assert run_replays(metrics_address) > 5
    finally:
        dep.stop_workers()
