"""Long tool calls do not hold up other sessions' run ends: a run's finish has slots of its own
(agentlane/run_records.py `engine_task_queue`). With every tool slot taken by a long `exec`, a
run without tools ended only when one of them did."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest

from agentlane.events import EventKind
from agentlane.run import ExecutionStatus
from clients.api import AgentlaneClient
from tests.conftest import make_deployment, settings_for
from tests.harness import Deployment


async def exec_running(client: AgentlaneClient, key: str, run_id: str) -> None:
    async for item in client.watch(key, 0):
        if item.event.run_id == run_id and item.event.kind == EventKind.TOOL_EXECUTION_START:
            return


@pytest.fixture(scope="module")
def two_slots(server: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    dep = make_deployment(
        server,
        tmp_path_factory.mktemp("slots"),
        AGENTLANE_MAX_TOOL_CALLS="2",
        AGENTLANE_WORKSPACES="shared",
    )
    dep.start_worker()
    yield dep
    dep.stop_workers()


async def test_a_run_ends_while_long_execs_hold_every_tool_slot(two_slots: Deployment) -> None:
    client = await AgentlaneClient.connect(settings_for(two_slots))
    ws = two_slots.data_dir / "ws"
    ws.mkdir(exist_ok=True)
    long = []
    for _ in range(2):
        key = f"busy-{uuid.uuid4().hex[:6]}"
        receipt = await client.send_and_start(
            key, "run `sleep 25` then say done", workspace=str(ws)
        )
        assert receipt.run_id
        long.append((key, receipt.run_id))
    for key, run_id in long:
        await asyncio.wait_for(exec_running(client, key, run_id), 30)
    started = time.monotonic()
    quick = await client.send_and_start(
        f"quick-{uuid.uuid4().hex[:6]}", "say hi", workspace=str(ws)
    )
    assert quick.run_id
    result = await client.wait_for_run(quick.run_id)
    assert result.status == ExecutionStatus.SUCCESS and result.reply == "hi"
    assert time.monotonic() - started < 10
    for key, _ in long:
        await client.abort(key, "done with it")


@pytest.fixture(scope="module")
def default_slots(server: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    dep = make_deployment(server, tmp_path_factory.mktemp("default-slots"))
    dep.start_worker()
    yield dep
    dep.stop_workers()


async def test_eight_long_execs_do_not_hold_up_another_sessions_tool(
    default_slots: Deployment,
) -> None:
    """Review O F7: eight sessions' long commands took every tool slot of a worker (8), and a
    ninth session's `echo` waited 33 s, told its healthy host was unavailable. Tool calls are
    mostly waiting: a worker takes 32 at once by default."""
    client = await AgentlaneClient.connect(settings_for(default_slots))
    long = []
    for _ in range(8):
        key = f"long-{uuid.uuid4().hex[:6]}"
        receipt = await client.send_and_start(key, "run `sleep 40` then say done")
        assert receipt.run_id
        long.append((key, receipt.run_id))
    for key, run_id in long:
        await asyncio.wait_for(exec_running(client, key, run_id), 30)
    started = time.monotonic()
    quick = await client.send_and_start(f"quick-{uuid.uuid4().hex[:6]}", "run `echo quick`")
    assert quick.run_id
    result = await client.wait_for_run(quick.run_id)
    took = time.monotonic() - started
    assert result.status == ExecutionStatus.SUCCESS, result.error
    assert took < 8, f"the quick exec took {took:.1f} s"
    for key, _ in long:
        await client.abort(key, "done")
