"""A worker's stop is bounded even when an activity ignores its cancellation: the SDK's
shutdown would wait for it forever; `workers.main._shut_down` gives up at its limit and the
log names what was cut short (`InFlight`)."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta

import pytest
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

import workers.main as worker_main
from workers.in_flight import InFlight

started = asyncio.Event()
released = asyncio.Event()  # set by the test at its end, so the process can exit


@activity.defn
async def stubborn() -> None:
    """Ignores every cancellation, as a call stuck in a library that swallows it would."""
    started.set()
    while not released.is_set():
        try:
            await asyncio.sleep(0.2)
        except asyncio.CancelledError:
            continue


@workflow.defn(sandboxed=False)  # its module imports the worker, which is not sandbox-safe
class StubbornWorkflow:
    @workflow.run
    async def run(self) -> None:
        await workflow.execute_activity(stubborn, start_to_close_timeout=timedelta(minutes=5))


async def test_a_stop_is_cut_short_at_its_limit(
    server: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_main, "SHUTDOWN_LIMIT_SECONDS", 4.0)
    client = await Client.connect(str(server.address))  # type: ignore[attr-defined]
    queue = f"stubborn-{uuid.uuid4().hex[:8]}"
    in_flight = InFlight()
    worker = Worker(
        client,
        task_queue=queue,
        workflows=[StubbornWorkflow],
        activities=[stubborn],
        interceptors=[in_flight],
        graceful_shutdown_timeout=timedelta(seconds=1),
    )
    running = asyncio.create_task(worker.run())
    wf_id = f"stubborn-{uuid.uuid4().hex[:8]}"
    await client.start_workflow(StubbornWorkflow.run, id=wf_id, task_queue=queue)
    await asyncio.wait_for(started.wait(), 30)
    assert in_flight.describe() == f"1 activities: stubborn of {wf_id} (attempt 1)"

    begun = time.monotonic()
    # Without the bound this would wait as long as the activity runs: fail instead of hanging.
    finished = await asyncio.wait_for(worker_main._shut_down([worker], asyncio.Event()), 20)
    took = time.monotonic() - begun
    assert not finished, "the SDK's shutdown ended although the activity ignored its cancel"
    assert 3.5 < took < 8, took
    assert "stubborn of" in in_flight.describe()
    await client.get_workflow_handle(wf_id).terminate()
    released.set()
    await asyncio.wait_for(running, 30)  # with the activity gone, the SDK's shutdown ends
