"""Live workflow activations run on the worker's event loop, replays on the SDK's threads, and
one that holds the loop past the limit is interrupted: its task fails, Temporal retries it, and
the worker goes on serving (workers/activation_executor.py)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from workers.activation_executor import LiveActivationsInline

SPUN: set[str] = set()  # workflows that already held the loop once (the retry must not)


@activity.defn
async def echo(n: int) -> int:
    return n


@workflow.defn(sandboxed=False)
class Steps:
    @workflow.run
    async def run(self, steps: int) -> list[int]:
        threads = []
        for i in range(steps):
            await workflow.execute_activity(echo, i, start_to_close_timeout=timedelta(seconds=30))
            threads.append(threading.get_ident())
        return threads


@workflow.defn(sandboxed=False)
class HoldsTheLoop:
    @workflow.run
    async def run(self, seconds: float) -> str:
        await workflow.execute_activity(echo, 1, start_to_close_timeout=timedelta(seconds=30))
        if workflow.info().workflow_id not in SPUN:
            SPUN.add(workflow.info().workflow_id)
            end = time.monotonic() + seconds
            while time.monotonic() < end:  # a policy stuck in a loop
                pass
        return "done"


def _worker(client: Client, queue: str, executor: LiveActivationsInline, **extra: int) -> Worker:
    return Worker(
        client,
        task_queue=queue,
        workflows=[Steps, HoldsTheLoop],
        activities=[echo],
        workflow_runner=UnsandboxedWorkflowRunner(),
        workflow_task_executor=executor,
        **extra,  # type: ignore[arg-type]
    )


async def test_live_activations_run_on_the_loop_and_replays_on_threads(server: object) -> None:
    client = await Client.connect(str(server.address))  # type: ignore[attr-defined]
    queue = f"inline-{uuid.uuid4().hex[:8]}"
    live = LiveActivationsInline(4)
    async with _worker(client, queue, live):
        threads = await client.execute_workflow(
            Steps.run, 5, id=f"steps-{uuid.uuid4().hex[:8]}", task_queue=queue
        )
    assert set(threads) == {threading.get_ident()}  # the test's loop runs the worker
    assert live.inline >= 6 and live.threaded == 0, (live.inline, live.threaded)

    # No cache: every activation after the first rebuilds the workflow from its history.
    replayed = LiveActivationsInline(4)
    async with _worker(client, queue, replayed, max_cached_workflows=0):
        threads = await client.execute_workflow(
            Steps.run, 3, id=f"steps-{uuid.uuid4().hex[:8]}", task_queue=queue
        )
    assert len(threads) == 3
    assert replayed.threaded >= 3, (replayed.inline, replayed.threaded)
    live.shutdown()
    replayed.shutdown()


async def test_an_activation_holding_the_loop_is_interrupted_and_retried(server: object) -> None:
    client = await Client.connect(str(server.address))  # type: ignore[attr-defined]
    queue = f"inline-{uuid.uuid4().hex[:8]}"
    executor = LiveActivationsInline(4, limit=1.0)
    wid = f"holds-{uuid.uuid4().hex[:8]}"
    async with _worker(client, queue, executor):
        begun = time.monotonic()
        handle = await client.start_workflow(HoldsTheLoop.run, 30.0, id=wid, task_queue=queue)
        assert await asyncio.wait_for(handle.result(), 30) == "done"
        took = time.monotonic() - begun
        # The worker still serves others after the interruption.
        other = await client.execute_workflow(
            Steps.run, 2, id=f"steps-{uuid.uuid4().hex[:8]}", task_queue=queue
        )
    assert len(other) == 2
    # Interrupted after about a second, not after the 30 s the code would have spun; the
    # failed task is retried at once (a failed task's retry is not delayed on a live worker).
    assert took < 15, took
    failures = [
        e.workflow_task_failed_event_attributes.failure.message
        async for e in handle.fetch_history_events()
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]
    assert len(failures) == 1 and "interrupted after 1 s" in failures[0], failures
    executor.shutdown()
